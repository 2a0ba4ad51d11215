package store

import (
	"strconv"
	"strings"
)

// cancelPrefix starts the Listener value that announces a cancelled running
// job. A queue name never holds a space (printable ASCII without spaces),
// so no queue can be mistaken for it.
const cancelPrefix = "cancel "

// CancelNotice is the value a Listener store sends (besides queue names)
// when JobCancel cancels a running job: the lease it voided, so that the
// process running that job's handler cancels it at once rather than at its
// next heartbeat.
func CancelNotice(l Lease) string {
	return cancelPrefix + strconv.FormatInt(l.ID, 10) + " " + l.Token
}

// ParseCancelNotice reports whether v, a value received from
// Listener.Listen, announces a cancelled running job (CancelNotice), and
// which lease it voided. Any other value is a queue name (or "").
func ParseCancelNotice(v string) (Lease, bool) {
	rest, ok := strings.CutPrefix(v, cancelPrefix)
	if !ok {
		return Lease{}, false
	}
	id, token, ok := strings.Cut(rest, " ")
	if !ok || token == "" {
		return Lease{}, false
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return Lease{}, false
	}
	return Lease{ID: n, Token: token}, true
}
