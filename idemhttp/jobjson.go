package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemhttp/wire"
)

// The reply of POST /v1/jobs is encoded by hand: encoding/json's reflection
// over wire.Job was about 3 % of a new-key request's CPU. The output is
// byte for byte what marshalJSON (encoding/json without HTML escaping)
// writes (TestAppendJobMatchesMarshal and FuzzAppendJob hold it to that,
// every field of wire.Job filled); whatever the hand encoder does not
// cover (a time json.Marshal refuses, a raw value that needs compacting or
// is invalid) falls back to writeJSON.

// replyBuffers recycles the encoding buffers of replies.
var replyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeEnqueueReply writes an EnqueueReply as writeJSON would. It keeps
// no pointer to reply or its job (the caller's may be on its stack).
func writeEnqueueReply(w http.ResponseWriter, status int, reply *wire.EnqueueReply) {
	bp := replyBuffers.Get().(*[]byte)
	defer replyBuffers.Put(bp)
	b := append((*bp)[:0], `{"job":`...)
	var ok bool
	if reply.Job == nil {
		b, ok = append(b, "null"...), true
	} else {
		b, ok = appendJob(b, reply.Job)
	}
	if !ok {
		writeJSON(w, status, copyEnqueueReply(reply))
		return
	}
	b = append(append(b, `,"existing":`...), strconv.FormatBool(reply.Existing)...)
	b = append(b, "}\n"...)
	*bp = b
	setHeader(w.Header(), "Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// copyEnqueueReply copies reply and its job, for writeJSON (an interface,
// which would move the caller's reply to the heap even when not called).
func copyEnqueueReply(reply *wire.EnqueueReply) *wire.EnqueueReply {
	out := &wire.EnqueueReply{Existing: reply.Existing}
	if reply.Job != nil {
		job := *reply.Job
		out.Job = &job
	}
	return out
}

// appendJob appends j as marshalJSON encodes it; false when it cannot
// (the caller then uses writeJSON, for its output or its error).
func appendJob(b []byte, j *wire.Job) ([]byte, bool) {
	ok := true
	b = appendField(b, `{"id":`, j.ID)
	b = appendField(b, `,"tenant":`, j.Tenant)
	b = appendField(b, `,"queue":`, j.Queue)
	b = appendField(b, `,"kind":`, j.Kind)
	b, ok = appendRaw(append(b, `,"args":`...), j.Args, ok)
	b = appendField(b, `,"state":`, j.State)
	b = strconv.AppendInt(append(b, `,"priority":`...), int64(j.Priority), 10)
	b = strconv.AppendInt(append(b, `,"attempt":`...), int64(j.Attempt), 10)
	b = strconv.AppendInt(append(b, `,"max_attempts":`...), int64(j.MaxAttempts), 10)
	b, ok = appendTime(append(b, `,"run_at":`...), j.RunAt, ok)
	b, ok = appendTime(append(b, `,"created_at":`...), j.CreatedAt, ok)
	if j.StartedAt != nil {
		b, ok = appendTime(append(b, `,"started_at":`...), *j.StartedAt, ok)
	}
	if j.FinishedAt != nil {
		b, ok = appendTime(append(b, `,"finished_at":`...), *j.FinishedAt, ok)
	}
	b = appendOptField(b, `,"partition_key":`, j.PartitionKey)
	b = appendOptField(b, `,"idempotency_key":`, j.IdempotencyKey)
	if len(j.DependsOn) > 0 {
		b = append(b, `,"depends_on":[`...)
		for i, d := range j.DependsOn {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, d)
		}
		b = append(b, ']')
	}
	if len(j.Result) > 0 {
		b, ok = appendRaw(append(b, `,"result":`...), j.Result, ok)
	}
	b = append(append(b, `,"was_cached":`...), strconv.FormatBool(j.WasCached)...)
	b = appendOptField(b, `,"original_job_id":`, j.OriginalJobID)
	b = appendOptField(b, `,"last_error":`, j.LastError)
	b = appendOptField(b, `,"error_code":`, j.ErrorCode)
	if j.ResolvedAt != nil {
		b, ok = appendTime(append(b, `,"resolved_at":`...), *j.ResolvedAt, ok)
	}
	b = appendOptField(b, `,"resolution_note":`, j.ResolutionNote)
	if len(j.Metadata) > 0 {
		b, ok = appendRaw(append(b, `,"metadata":`...), j.Metadata, ok)
	}
	b = appendOptField(b, `,"worker_id":`, j.WorkerID)
	if j.Retry != nil {
		r, err := marshalJSON(j.Retry)
		ok = ok && err == nil
		b = append(append(b, `,"retry":`...), r...)
	}
	b = appendOptField(b, `,"lease_token":`, j.LeaseToken)
	if j.LeaseExpiresAt != nil {
		b, ok = appendTime(append(b, `,"lease_expires_at":`...), *j.LeaseExpiresAt, ok)
	}
	return append(b, '}'), ok
}

func appendField(b []byte, name, v string) []byte { return appendString(append(b, name...), v) }

// appendOptField is appendField for an omitempty string.
func appendOptField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendField(b, name, v)
}

// appendTime appends t as time.Time.MarshalJSON does; false where it
// fails (a year outside 0–9999, an odd zone).
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	return append(b, '"'), ok && err == nil
}

// appendRaw appends a raw JSON value that marshalJSON would copy as it
// is: valid, with no whitespace to compact (without HTML escaping,
// encoding/json only compacts a raw value: '<' and U+2028 stay as they
// are); false for any other.
func appendRaw(b, raw []byte, ok bool) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), ok // as json.RawMessage.MarshalJSON
	}
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			return b, false
		}
	}
	return append(b, raw...), ok && json.Valid(raw) // an empty one is not valid
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does
// without HTML escaping (marshalJSON): <, > and & as they are, control
// characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped
// (encoding/json always escapes those two).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}
