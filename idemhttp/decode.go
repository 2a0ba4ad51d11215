package idemhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/retryspec"
)

// readBody reads the request body under the size limit. An empty body is
// allowed only when optional; a body must be application/json (415).
func readBody(r *http.Request, limit int64, optional bool) ([]byte, error) {
	body, err := readUpTo(r.Body, limit+1, r.ContentLength)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, err
		}
		return nil, newProblem(http.StatusBadRequest, ProblemMalformedJSON, "Malformed request", "reading the body failed")
	}
	if int64(len(body)) > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	if !utf8.Valid(body) {
		return nil, newProblem(http.StatusBadRequest, ProblemMalformedJSON, "Malformed JSON", "the body is not valid UTF-8")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil, nil
		}
		return nil, newProblem(http.StatusBadRequest, ProblemMalformedJSON, "Malformed request", "a JSON body is required")
	}
	if err := checkContentType(r); err != nil {
		return nil, err
	}
	return body, nil
}

// readUpTo is io.ReadAll(io.LimitReader(rd, n)) (n > 0) with its buffer
// sized for the declared length (a Content-Length; -1 = unknown), so that
// a body of that length is read into one allocation that fits it rather
// than a 512-byte one; a body of another length reads as it would. Only
// up to maxBodyPrealloc is allocated before the bytes arrive: a declared
// length is the client's word, and a larger buffer grows as it fills.
func readUpTo(rd io.Reader, n, declared int64) ([]byte, error) {
	size := int64(512)
	if declared >= 0 && declared < n {
		size = min(declared+1, maxBodyPrealloc) // room for the read that finds EOF
	}
	b := make([]byte, 0, min(size, n))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as io.ReadAll does
		}
		m, err := rd.Read(b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil || int64(len(b)) >= n {
			return b, err
		}
	}
}

// maxBodyPrealloc bounds the buffer readUpTo allocates for a declared
// length before reading it.
const maxBodyPrealloc = 64 << 10

// checkQuery rejects a query string that does not parse (a malformed
// percent-escape such as "?queue=%"), which url.Values would silently drop,
// one whose values are not valid UTF-8 or hold a NUL byte, and a
// parameter other than those the route takes (allowed): ignored, a typo
// in a filter (?stat=dead) selected every job.
func checkQuery(r *http.Request, allowed []string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return invalid("query", "malformed query string: "+err.Error())
	}
	for name, vs := range q {
		for _, v := range vs {
			if !utf8.ValidString(name) || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				field := name
				if !utf8.ValidString(name) {
					field = "query"
				}
				return invalid(field, "must be valid UTF-8 without NUL bytes")
			}
		}
	}
	return unknownQuery(q, allowed)
}

// checkContentType accepts application/json (with parameters) only.
func checkContentType(r *http.Request) error {
	ct := headerValue(r.Header, "Content-Type")
	if ct == "application/json" {
		return nil // what ParseMediaType accepts below, without its parse and map
	}
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return newProblem(http.StatusUnsupportedMediaType, ProblemUnsupportedMedia, "Unsupported media type",
			"the body must be application/json")
	}
	return nil
}

// decodeStrict decodes one JSON value into v: unknown fields, wrong types,
// trailing data, a member name repeated in one object (anywhere in the
// value, args and metadata included) and null where an object is wanted
// (the body itself, or a member that no pointer makes optional) are 400
// problems naming the field.
func decodeStrict(body []byte, v any) error { return decodeNamed(body, v, memberNames) }

// decodeEnvelope is decodeStrict for a body whose items are decoded and
// checked one by one afterwards (the jobs of POST /v1/jobs/batch, kept as
// json.RawMessage): member names are compared in its outermost object only
// (envelopeNames), so that an item that repeats one is refused alone.
func decodeEnvelope(body []byte, v any) error { return decodeNamed(body, v, envelopeNames) }

// decodeNamed is decodeStrict with names as the scan of member names.
func decodeNamed(body []byte, v any, names func([]byte) (string, bool, bool)) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return newProblem(http.StatusBadRequest, ProblemMalformedJSON, "Malformed JSON", "unexpected data after the JSON value")
	}
	if bytes.Contains(body, []byte("null")) {
		t := reflect.TypeOf(v)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if path, ok := nullObject(body, t, ""); ok {
			if path == "" {
				path = "body"
			}
			return invalid(path, "must be an object, not null")
		}
	}
	path, dup, foldable := names(body)
	if dup {
		return invalid(path, "duplicate member name")
	}
	if !foldable {
		return nil
	}
	if name, ok := exactNames(body, reflect.TypeOf(v)); !ok {
		return invalid(name, "unknown field")
	}
	return nil
}

// exactNames checks the members of the objects of body that decode into
// structs of t (through pointers and slices) against their JSON names:
// encoding/json also matches a member case-insensitively ("KIND" for kind,
// the Kelvin sign for k), but JSON names are case-sensitive, so such a
// member is an unknown field. body has been decoded into a t without
// error; decodeStrict reads it again only when a member name could fold
// (foldableName).
func exactNames(body []byte, t reflect.Type) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		if k := t.Elem().Kind(); k != reflect.Struct && k != reflect.Pointer && k != reflect.Slice {
			return "", true
		}
		var items []json.RawMessage
		if json.Unmarshal(body, &items) != nil {
			return "", true
		}
		for _, it := range items {
			if name, ok := exactNames(it, t.Elem()); !ok {
				return name, false
			}
		}
	case reflect.Struct:
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
			return "", true
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(body, &members) != nil {
			return "", true
		}
		fields := jsonFields(t)
		for name, raw := range members {
			ft, ok := fields[name]
			if !ok {
				return name, false
			}
			if name, ok := exactNames(raw, ft); !ok {
				return name, false
			}
		}
	}
	return "", true
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// nullObject finds a null in body, decoded into a t without error, where t
// wants an object that no pointer makes optional: encoding/json leaves the
// struct (or map) as it was, so null would be taken as {} — a replay whose
// filter is null selects everything. It returns the path of that null
// (path itself, "" for the body), as memberNames names members. A pointer
// makes null mean absent.
func nullObject(body []byte, t reflect.Type, path string) (string, bool) {
	body = bytes.TrimSpace(body)
	null := string(body) == "null"
	switch t.Kind() {
	case reflect.Pointer:
		if !null {
			return nullObject(body, t.Elem(), path)
		}
	case reflect.Map:
		// A map member null is an empty map, which is what absent means;
		// only the body itself must be an object.
		return path, null && path == ""
	case reflect.Struct:
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
			return "", false
		}
		if null {
			return path, true
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(body, &members) != nil {
			return "", false
		}
		fields := jsonFields(t)
		for name, raw := range members {
			ft, ok := fields[name]
			if !ok {
				continue
			}
			member := name
			if path != "" {
				member = path + "." + name
			}
			if p, ok := nullObject(raw, ft, member); ok {
				return p, true
			}
		}
	case reflect.Slice:
		if k := t.Elem().Kind(); k != reflect.Struct && k != reflect.Pointer && k != reflect.Slice {
			return "", false
		}
		var items []json.RawMessage
		if json.Unmarshal(body, &items) != nil {
			return "", false
		}
		for i, it := range items {
			if p, ok := nullObject(it, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

// jsonFields maps the JSON names of the fields of struct type t to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// jsonProblem turns a decoding error into a 400 problem.
func jsonProblem(err error) *Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		if typ.Value == wire.EmptyListItem {
			return invalid(field, "an empty item in the list (leave the field out for no filter)")
		}
		kind := typ.Type.Kind().String()
		if v, ok := strings.CutPrefix(typ.Value, "number "); ok && kind != "float64" && jsonKind(kind) == "a number" {
			// A number that is not a whole one, or out of the field's range.
			return invalid(field, fmt.Sprintf("must be a whole number within %s's range, not %s", typ.Type, v))
		}
		return invalid(field, fmt.Sprintf("must be %s, not %s", jsonKind(kind), typ.Value))
	case errors.As(err, &syn):
		return newProblem(http.StatusBadRequest, ProblemMalformedJSON, "Malformed JSON",
			fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return newProblem(http.StatusBadRequest, ProblemMalformedJSON, "Malformed JSON", "the JSON body is truncated")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return invalid(f, "unknown field")
	}
	return newProblem(http.StatusBadRequest, ProblemMalformedJSON, "Malformed JSON", strings.TrimPrefix(msg, "json: "))
}

func jsonKind(k string) string {
	switch k {
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return "a " + k
}

// decodeBody reads and strictly decodes the body into v.
func (s *Server) decodeBody(r *http.Request, v any, optional bool) error {
	body, err := readBody(r, s.cfg.MaxBodyBytes, optional)
	if err != nil || body == nil {
		return err
	}
	return decodeStrict(body, v)
}

// parseDuration parses an optional duration of field: Go syntax ("30s",
// "1h30m") or integer seconds ("30"), as the retry object's durations.
func parseDuration(field string, s *string) (*time.Duration, error) {
	d, err := retryspec.Duration(field, s)
	return d, asProblem(err)
}

// asProblem is err with a validation error as its 400 problem.
func asProblem(err error) error {
	if err == nil {
		return nil // without the errors.As target below, which escapes (three allocations per enqueue)
	}
	var inv *idemtype.InvalidError
	if errors.As(err, &inv) {
		return invalid(inv.Field, inv.Reason)
	}
	return err
}

// parseTime parses an optional RFC 3339 time of field, in UTC.
func parseTime(field string, s *string) (time.Time, error) {
	if s == nil || *s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, invalid(field, fmt.Sprintf("%q is not an RFC 3339 time with a zone", *s))
	}
	// Times are stored and rendered in UTC, which RFC 3339 (and JSON)
	// can write only for the years 0000 to 9999: an offset may carry a
	// time at the edge of that range out of it.
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}, invalid(field, fmt.Sprintf("%q is outside the years 0000 to 9999 in UTC", *s))
	}
	return t.UTC(), nil
}

// parseID parses a job id: a positive decimal int64 without sign or padding.
func parseID(s string) (int64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

func formatID(id int64) string { return strconv.FormatInt(id, 10) }

// parseIDList parses ids given as JSON strings (or numbers) of field.
func parseIDList(field string, in []wire.JobID) ([]int64, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]int64, len(in))
	for i, n := range in {
		id, ok := parseID(string(n))
		if !ok {
			return nil, invalid(field, fmt.Sprintf("%q is not a job id", string(n)))
		}
		out[i] = id
	}
	return out, nil
}

// pathID returns the {id} path value; an id that cannot exist is 404.
func pathID(r *http.Request) (int64, error) {
	id, ok := parseID(r.PathValue("id"))
	if !ok {
		return 0, newProblem(http.StatusNotFound, ProblemNotFound, "Not found", "no job with id "+strconv.Quote(r.PathValue("id")))
	}
	return id, nil
}

// rawOrNil returns nil for an absent or null JSON value.
func rawOrNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	return b
}

// explicitZero reports whether the JSON object body sets field to 0: the
// wire structs cannot tell 0 from absent, and an explicit 0 is out of range
// for max_attempts and limit (absent means the default).
func explicitZero(body []byte, field string) bool {
	return mayName(body, field) && decodedZero(body, field)
}

// mayName reports whether a key of the JSON body may decode to field: only
// if field's bytes are in it, or if an escape (\u…) spells it; most bodies
// need no decoding at all.
func mayName(body []byte, field string) bool {
	return bytes.Contains(body, []byte(field)) || bytes.IndexByte(body, '\\') >= 0
}

// decodedZero is explicitZero by decoding body: whether field is present
// with the value 0.
func decodedZero(body []byte, field string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	v, ok := m[field]
	if !ok {
		return false
	}
	var n *float64
	return json.Unmarshal(v, &n) == nil && n != nil && *n == 0
}
