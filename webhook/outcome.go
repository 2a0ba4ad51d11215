package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class is what the executor does with a push's job.
type Class int

// The classes of an [Outcome].
const (
	// ClassCompleted: the target answered 2xx; the body is the job's result.
	ClassCompleted Class = iota + 1
	// ClassRetry: 408, 429, 5xx, a timeout or a connection error; retry with
	// backoff, no sooner than Outcome.RetryAfter.
	ClassRetry
	// ClassDead: 410, any other 4xx, an unfollowed 3xx, an invalid URL or a
	// forbidden address; retrying cannot help.
	ClassDead
)

// String names the class.
func (c Class) String() string {
	switch c {
	case ClassCompleted:
		return "completed"
	case ClassRetry:
		return "retry"
	case ClassDead:
		return "dead"
	default:
		return "Class(" + strconv.Itoa(int(c)) + ")"
	}
}

// Outcome is the result of one push.
type Outcome struct {
	Class      Class
	Status     int           // HTTP status; 0 when no response arrived
	Latency    time.Duration // from sending the request to reading the body
	RetryAfter time.Duration // from the Retry-After header; 0 when absent
	// Body is the response body up to Config.MaxBodyBytes: the result when
	// completed, an excerpt for the attempt log otherwise.
	Body      []byte
	Truncated bool  // the body was longer than Body
	Err       error // nil only when completed
}

// ErrTargetBusy reports that a target's concurrency cap stayed full for
// Config.SlotWait; the push was not sent and may be retried.
var ErrTargetBusy = errors.New("webhook: target busy")

// ErrInvalidURL reports a target URL that is not absolute http or https.
var ErrInvalidURL = errors.New("webhook: invalid target url")

// StatusError is the error of an outcome whose response was not 2xx.
type StatusError struct {
	Status int
	// Redirect says why a redirect was not followed when the sender
	// follows them (Config.FollowRedirects); "" otherwise.
	Redirect string
}

// Error names the status, and why a redirect was not followed.
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("webhook: target answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Redirect != "" {
		msg += " (redirect not followed: " + e.Redirect + ")"
	}
	return msg
}

// classifyStatus maps a response status to its class.
func classifyStatus(status int) Class {
	switch {
	case status >= 200 && status < 300:
		return ClassCompleted
	case status == http.StatusTooManyRequests, status == http.StatusRequestTimeout, status >= 500:
		return ClassRetry
	default:
		return ClassDead
	}
}

// classifyError maps a transport error to its class: a forbidden address or
// a bad URL is dead, anything else (timeouts, refused or reset connections,
// cancellation) may succeed later.
func classifyError(err error) Class {
	if errors.Is(err, ErrForbiddenAddress) || errors.Is(err, ErrInvalidURL) {
		return ClassDead
	}
	return ClassRetry
}

// parseRetryAfter reads delay-seconds or an HTTP-date; 0 when absent,
// malformed or in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// maxRetryAfter bounds a Retry-After so an absurd value cannot overflow.
const maxRetryAfter = 7 * 24 * time.Hour
