package main

import (
	"strings"
	"testing"
)

const sample = `2026-11-26 16:09:01.018 UTC [16517] postgres@exp LOG:  PARSE MESSAGE STATISTICS
2026-11-26 16:09:01.018 UTC [16517] postgres@exp DETAIL:  ! system usage stats:
	!	0.000100 s user, 0.000500 s system, 0.002154 s elapsed
	!	[0.000000 s user, 0.007247 s system total]
2026-11-26 16:09:01.018 UTC [16517] postgres@exp STATEMENT:  SELECT 1 FROM peer_idem_1_2.jobs
	WHERE x = 1
2026-11-26 16:09:01.019 UTC [16517] postgres@exp LOG:  EXECUTE MESSAGE STATISTICS
2026-11-26 16:09:01.019 UTC [16517] postgres@exp DETAIL:  ! system usage stats:
	!	0.001000 s user, 0.000000 s system, 0.000108 s elapsed
2026-11-26 16:09:01.019 UTC [16517] postgres@exp STATEMENT:  SELECT 1 FROM peer_idem_1_3.jobs
	WHERE x = 1
2026-11-26 16:09:01.026 UTC [16518] postgres@exp LOG:  QUERY STATISTICS
2026-11-26 16:09:01.026 UTC [16518] postgres@exp DETAIL:  ! system usage stats:
	!	0.000200 s user, 0.000000 s system, 0.000141 s elapsed
2026-11-26 16:09:01.026 UTC [16518] postgres@exp STATEMENT:  UPDATE peer_river_4_5.river_job SET a = 1
2026-11-26 16:09:01.027 UTC [16518] postgres@exp LOG:  checkpoint starting: time
`

// TestParse: blocks are attributed to the statement that follows them,
// continuation lines join the statement, schemas are folded so one
// statement of two schemas is one group, and systems are told apart.
func TestParse(t *testing.T) {
	groups, totals, err := parse(strings.NewReader(sample), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 {
		t.Fatalf("%d groups: %+v", len(groups), groups)
	}
	g := groups[0]
	if g.system != "idem" || g.count != 2 || g.statement != "SELECT 1 FROM S.jobs WHERE x = 1" || g.seconds < 0.0015999 || g.seconds > 0.0016001 {
		t.Errorf("first group %+v", g)
	}
	if r := groups[1]; r.system != "river" || r.count != 1 || r.seconds < 0.0001999 || r.seconds > 0.0002001 {
		t.Errorf("second group %+v", r)
	}
	if totals["idem"] < 0.0015999 || totals["river"] < 0.0001999 {
		t.Errorf("totals %v", totals)
	}
}
