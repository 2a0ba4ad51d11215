// Command pgstmtcpu sums the CPU time PostgreSQL spent per statement, from a
// server log written with log_statement_stats = on and
// log_min_error_statement = log (so each statistics block is followed by its
// STATEMENT line). It answers "which statement costs what" where
// pg_stat_statements is not loaded (it needs a restart to load), e.g.:
//
//	psql -c "ALTER DATABASE exp SET log_statement_stats = on" \
//	     -c "ALTER DATABASE exp SET log_min_error_statement = 'log'"
//	start=$(wc -l < /var/log/postgresql/postgresql-15-main.log)
//	go run ./cmd/peer -url postgres://postgres@127.0.0.1/exp -scenarios work -keys on -work-n 10000
//	psql -c "ALTER DATABASE exp RESET log_statement_stats" -c "ALTER DATABASE exp RESET log_min_error_statement"
//	tail -n +$start /var/log/postgresql/postgresql-15-main.log | go run ./cmd/pgstmtcpu
//
// Statements are grouped by their first characters with schema names
// (peer_<system>_<pid>_<n>) replaced by S; the system is named when the
// statement names a peer schema. (The statistics cover each protocol
// message's processing; logging them costs CPU too, so compare shares, not
// totals against an unlogged run.)
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	statsRe  = regexp.MustCompile(`LOG:  \w+ (?:MESSAGE )?STATISTICS`)
	usageRe  = regexp.MustCompile(`([\d.]+) s user, ([\d.]+) s system, [\d.]+ s elapsed`)
	schemaRe = regexp.MustCompile(`peer_(\w+?)_\d+_\d+`)
	spaceRe  = regexp.MustCompile(`\s+`)
)

// entry is the CPU time of one statement group.
type entry struct {
	system, statement string
	seconds           float64
	count             int
}

// parse reads a log and returns the groups, most expensive first, with the
// total per system.
func parse(r io.Reader, width int) ([]*entry, map[string]float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	groups := map[[2]string]*entry{}
	var pending float64 // CPU of the statistics block awaiting its STATEMENT
	inBlock, haveUsage := false, false
	var stmt *strings.Builder
	flush := func() {
		if stmt == nil {
			return
		}
		text := spaceRe.ReplaceAllString(stmt.String(), " ")
		system := "?"
		if m := schemaRe.FindStringSubmatch(text); m != nil {
			system = m[1]
		}
		text = schemaRe.ReplaceAllString(text, "S")
		if len(text) > width {
			text = text[:width]
		}
		k := [2]string{system, text}
		e := groups[k]
		if e == nil {
			e = &entry{system: system, statement: text}
			groups[k] = e
		}
		e.seconds += pending
		e.count++
		stmt, pending = nil, 0
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case stmt != nil && strings.HasPrefix(line, "\t") && !strings.HasPrefix(strings.TrimSpace(line), "!"):
			stmt.WriteString(" ")
			stmt.WriteString(strings.TrimSpace(line))
			continue
		case stmt != nil:
			flush()
		}
		switch {
		case statsRe.MatchString(line):
			inBlock, haveUsage, pending = true, false, 0
		case inBlock && !haveUsage && usageRe.MatchString(line):
			m := usageRe.FindStringSubmatch(line)
			u, _ := strconv.ParseFloat(m[1], 64)
			s, _ := strconv.ParseFloat(m[2], 64)
			pending, haveUsage = u+s, true
		case inBlock && strings.Contains(line, "STATEMENT:  "):
			inBlock = false
			stmt = &strings.Builder{}
			stmt.WriteString(strings.SplitN(line, "STATEMENT:  ", 2)[1])
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	out := make([]*entry, 0, len(groups))
	totals := map[string]float64{}
	for _, e := range groups {
		out = append(out, e)
		totals[e.system] += e.seconds
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seconds > out[j].seconds })
	return out, totals, nil
}

func main() {
	top := flag.Int("top", 30, "statement groups to print")
	width := flag.Int("width", 100, "characters of a statement that name its group")
	flag.Parse()
	groups, totals, err := parse(os.Stdin, *width)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgstmtcpu:", err)
		os.Exit(1)
	}
	var systems []string
	for s := range totals {
		systems = append(systems, s)
	}
	sort.Strings(systems)
	for _, s := range systems {
		fmt.Printf("%s: %.3f s\n", s, totals[s])
	}
	fmt.Println("\n| system | CPU s | statements | µs each | statement |\n|---|---:|---:|---:|---|")
	for i, e := range groups {
		if i >= *top {
			break
		}
		fmt.Printf("| %s | %.3f | %d | %.0f | `%s` |\n", e.system, e.seconds, e.count, e.seconds*1e6/float64(e.count), strings.ReplaceAll(e.statement, "|", `\|`))
	}
}
