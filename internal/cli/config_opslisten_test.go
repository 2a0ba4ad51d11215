package cli

import "testing"

// TestConfigRefusesOpsListenOnListen: an ops_listen that takes the port of
// listen (the same address, or one of them on every interface) is refused
// at start-up naming ops_listen, exit code 2. It was accepted: the second
// bind then failed with exit code 1 and a hint blaming "another process",
// after the database had been created and migrated. Another port, or
// port 0 (any free port) on both, is accepted.
func TestConfigRefusesOpsListenOnListen(t *testing.T) {
	t.Parallel()
	checkConfigRefusals(t, []configRefusal{
		{"listen = \"127.0.0.1:8080\"\nops_listen = \"127.0.0.1:8080\"\n", "", "ops_listen"},
		{"listen = \":8080\"\nops_listen = \"127.0.0.1:8080\"\n", "", "ops_listen"},
		{"listen = \"127.0.0.1:8080\"\n", "IDEM_OPS_LISTEN=0.0.0.0:8080", "ops_listen"},
		{"listen = \"[::]:http\"\nops_listen = \"127.0.0.1:80\"\n", "", "ops_listen"},
	})
	for _, ok := range []string{
		"listen = \"127.0.0.1:8080\"\nops_listen = \"127.0.0.1:9090\"\n",
		"listen = \"127.0.0.1:0\"\nops_listen = \"127.0.0.1:0\"\n",
		"listen = \"127.0.0.1:8080\"\nops_listen = \"127.0.0.2:8080\"\n",
	} {
		if _, err := loadFile(t, ok, nil); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}
