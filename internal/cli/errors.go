package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

// Exit codes of the idem command, documented in `idem --help` and
// docs/operations.md.
const (
	ExitOK       = 0 // success
	ExitError    = 1 // any other failure
	ExitUsage    = 2 // bad flags, arguments or configuration
	ExitNotFound = 3 // the job, key, database or its schema does not exist
	ExitConflict = 4 // the state forbids it: wrong state, lease lost, key reused or in progress
)

// exitCodesHelp documents the exit codes in the root help.
const exitCodesHelp = `Exit codes: 0 ok, 1 error, 2 usage (bad flag, argument or configuration),
3 not found (job, key, database or schema), 4 conflict (wrong state, lease lost,
idempotency key reused or in progress).`

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a usage error (exit code 2).
func usageErr(err error) error { return &exitError{code: ExitUsage, err: err} }

// hintError carries an actionable hint printed under the error.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

// withHint attaches an actionable hint to err.
func withHint(err error, hint string) error { return &hintError{err: err, hint: hint} }

// cobraUsage reports whether err is one of cobra's own usage errors.
func cobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag", "if any flags in the group"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// classify returns the exit code of err and a hint ("" = none).
func classify(err error) (code int, hint string) {
	var he *hintError
	if errors.As(err, &he) {
		hint = he.hint
	}
	var ee *exitError
	var ce *idemclient.Error
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case cobraUsage(err):
		code = ExitUsage
	case errors.Is(err, errNoDatabase), errors.Is(err, errNoSchema), errors.Is(err, idemtype.ErrNotFound):
		code = ExitNotFound
	case errors.Is(err, idemtype.ErrWrongState), errors.Is(err, idemtype.ErrLeaseLost),
		errors.Is(err, idemtype.ErrKeyReused), errors.Is(err, idemtype.ErrKeyInProgress):
		code = ExitConflict
	case errors.As(err, &ce) && ce.Status == http.StatusConflict:
		code = ExitConflict
	case errors.Is(err, idemtype.ErrInvalid):
		code = ExitUsage
	default:
		code = ExitError
	}
	if hint != "" {
		return code, hint
	}
	switch {
	case code == ExitUsage:
		hint = "see `idem <command> --help`"
	case errors.As(err, &ce) && ce.Status == http.StatusUnauthorized:
		hint = "pass --api-key or set " + envAPIKey + " (`idem serve` prints an admin key on first start; `idem apikey create` makes more)"
	case errors.As(err, &ce) && ce.Status == http.StatusForbidden:
		hint = "this needs an admin key, or a key of the tenant you act in"
	case code == ExitNotFound:
		hint = "check the id or key; `idem jobs list` and `idem dlq list` show what exists"
	case errors.Is(err, idemtype.ErrKeyReused) && errors.As(err, &ce) && ce.JobID != "":
		hint = "the key belongs to job " + ce.JobID + ", made from other fields (`idem jobs get " + ce.JobID +
			"`); send the same fields to get it back, or use another key"
	case errors.Is(err, idemtype.ErrKeyReused):
		hint = "the key was used with other fields; send the same ones, or use another key"
	case errors.Is(err, idemtype.ErrKeyInProgress):
		hint = "a request with this key is still running; retry when it has finished"
	case code == ExitConflict && errors.As(err, &ce) && ce.JobID != "":
		hint = "the job changed state; inspect it with `idem jobs get " + ce.JobID + "`"
	case code == ExitConflict:
		hint = "the job or key changed state; inspect it with `idem jobs get ID`"
	case unreachable(err):
		hint = "is `idem serve` running there? set --url or " + envURL
	}
	return code, hint
}

// unreachable reports whether err is a failure to reach the server: a
// network error of a request (*url.Error, *net.OpError, *net.DNSError).
// Not any net.Error: a syscall.Errno (a missing file) is one too.
func unreachable(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de) ||
		strings.Contains(err.Error(), "connection refused")
}

// message renders err once-prefixed: the client's own "idem: " prefix
// inside is removed so the line reads "idem: <message>".
func message(err error) string {
	return strings.ReplaceAll(err.Error(), "idem: ", "")
}

// reportError prints err (as JSON when asJSON) and returns its exit code.
func reportError(w io.Writer, err error, asJSON bool) int {
	code, hint := classify(err)
	if asJSON {
		body := map[string]any{"error": map[string]any{"message": message(err), "exit_code": code, "hint": hint}}
		enc := json.NewEncoder(w) // one line, '<' and '&' as they are
		enc.SetEscapeHTML(false)
		_ = enc.Encode(body)
		return code
	}
	fmt.Fprintln(w, "idem:", cell(message(err), 0))
	if hint != "" {
		fmt.Fprintln(w, "hint:", hint)
	}
	return code
}

// notFoundLists name, per command group, where a user sees what exists.
var notFoundLists = map[string]string{
	"jobs": "`idem jobs list` shows the jobs", "enqueue": "`idem jobs list` shows the jobs",
	"dlq": "`idem dlq list` shows the dead jobs and `idem jobs list` every job", "targets": "`idem targets list` shows the targets",
	"schedules": "`idem schedules list` shows the schedules", "limits": "`idem limits list` shows the limits",
	"topics": "`idem topics subscriptions TOPIC` shows a topic's subscriptions",
	"batch":  "a batch's id is the one `idem batch create` printed",
}

// withNotFoundHint gives a 404 of the server, met by cmd, a hint naming
// the list of cmd's resource and the tenant the key acts in (an id that
// exists in another tenant answers 404 too), and an unknown key id of
// `idem apikey` one naming `idem apikey list`. Other errors are returned
// unchanged, as is one that carries a hint already.
func withNotFoundHint(err error, cmd *cobra.Command) error {
	var he *hintError
	if code, _ := classify(err); code != ExitNotFound || errors.As(err, &he) {
		return err
	}
	for cmd.HasParent() && cmd.Parent().HasParent() {
		cmd = cmd.Parent()
	}
	if cmd.Name() == "apikey" { // the database, not the API: no tenant
		return withHint(err, "check the id; `idem apikey list` shows the keys of this database")
	}
	var ce *idemclient.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		return err
	}
	list, ok := notFoundLists[cmd.Name()]
	if !ok {
		return err
	}
	return withHint(err, "check the id or name; "+list+" of your key's tenant "+
		"(an admin key acts in `default`: add --tenant T for another tenant's)")
}
