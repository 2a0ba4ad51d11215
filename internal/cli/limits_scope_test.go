package cli

import (
	"strings"
	"testing"
)

// TestLimitsListTellsSharedFromDefault: a queue's shared limit (every
// tenant together) and the default limit of every tenant (tenant '*', each
// tenant its own budget) on the same queue are told apart by `limits list`
// and `stats`, and --json keeps each one's tenant as the API has it.
func TestLimitsListTellsSharedFromDefault(t *testing.T) {
	t.Parallel()
	mustRun, _ := cliAPI(t)
	mustRun("limits", "set", "--for-queue", "mail", "--rate", "1000/1m")
	mustRun("limits", "set", "--for-tenant", "*", "--for-queue", "mail", "--rate", "10/1m")
	for _, cmd := range [][]string{{"limits", "list"}, {"stats"}} {
		tenantOf := map[string]string{} // rate → tenant column
		for _, line := range strings.Split(mustRun(cmd...), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && (f[2] == "1000/1m" || f[2] == "10/1m") {
				tenantOf[f[2]] = f[0]
			}
		}
		if len(tenantOf) != 2 || tenantOf["1000/1m"] == tenantOf["10/1m"] {
			t.Fatalf("%v: the shared and the default limit show the same tenant: %v", cmd, tenantOf)
		}
		if tenantOf["10/1m"] != "*" {
			t.Fatalf("%v: the default limit shows tenant %q, want *", cmd, tenantOf["10/1m"])
		}
	}
}
