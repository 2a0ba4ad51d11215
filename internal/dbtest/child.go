package dbtest

import (
	"io"
	"os"
	"os/exec"
	"testing"
)

// StartChild starts the running test binary again as a child process (no
// test runs in it: its TestMain sends it to its role by an environment
// variable of env, added to this process's environment). Its stderr is this
// process's; its stdin and stdout are returned as pipes. Stopping the child
// (closing stdin, a signal, Wait) is the caller's.
func StartChild(t testing.TB, env ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	var stdout io.ReadCloser
	if err == nil {
		stdout, err = cmd.StdoutPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		t.Fatalf("start child %v: %v", env, err)
	}
	return cmd, stdin, stdout
}
