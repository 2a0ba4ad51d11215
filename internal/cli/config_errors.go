package cli

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/go-viper/mapstructure/v2"
)

// Configuration errors in the file's terms (see loadConfig).

// mapKeyRE is a map key in a decoder's field name (retry_by_queue[emails]);
// a list index ([0]) is all digits and stays as it is.
var mapKeyRE = regexp.MustCompile(`\[([^\]]*[^0-9\]][^\]]*)\]`)

// configKeyName is the dotted key of a decoder's field name:
// retry_by_queue[emails] is retry_by_queue.emails, http.cors_origins[0]
// stays.
func configKeyName(name string) string { return mapKeyRE.ReplaceAllString(name, ".$1") }

// describeKind names a TOML value's kind the way the file writes it.
func describeKind(t reflect.Type) string {
	if t == nil {
		return "nothing"
	}
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "a table"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "a boolean"
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number"
	}
	return t.String()
}

// configHint is the hint under every configuration error.
const configHint = "docs/idem.example.toml lists every key with its default; " +
	"IDEM_<KEY> sets one from the environment (`idem serve --help`)"

// configErr is a configuration error: exit code 2, with configHint.
func configErr(err error) error { return withHint(usageErr(err), configHint) }

// configMessage renders a decoding or validation error in the file's
// terms: each mistake once, "; "-separated, named by its dotted key (the
// decoder's retry_by_queue[emails] is retry_by_queue.emails), followed by
// the variable or flag that set it when one did (sources: `jobs.lease
// (IDEM_JOBS_LEASE) "abc" is not a duration`), and an unknown key as
// `unknown key "jobs.leese" in FILE` — never the decoder's framing.
func configMessage(err error, path string, sources map[string]string) string {
	msgs := decodeMessages(err, path)
	for i, m := range msgs {
		key, rest, found := strings.Cut(m, " ")
		if !found {
			continue
		}
		// Another dotted key named in the message (maintenance.leader_ttl
		// … is not under maintenance.schedule_grace …) gets its source too.
		for other, src := range sources {
			if other != key && strings.Contains(other, ".") {
				rest = strings.ReplaceAll(rest, " "+other+" ", " "+other+" ("+src+") ")
			}
		}
		if src, ok := sources[key]; ok {
			key += " (" + src + ")"
		}
		msgs[i] = key + " " + rest
	}
	return strings.Join(msgs, "; ")
}

// decodeMessages are the mistakes of a decoding or validation error, one
// message each, each starting with its key where it has one.
func decodeMessages(err error, path string) []string {
	var msgs []string
	var walk func(error)
	walk = func(err error) {
		if de, ok := err.(*mapstructure.DecodeError); ok {
			name := configKeyName(de.Name())
			inner := de.Unwrap().Error()
			var ue *mapstructure.UnconvertibleTypeError
			if errors.As(de.Unwrap(), &ue) {
				inner = "wants " + describeKind(ue.Expected.Type()) + ", got " + describeKind(reflect.TypeOf(ue.Value))
			}
			if keys, ok := strings.CutPrefix(inner, "has invalid keys: "); ok {
				for _, key := range strings.Split(keys, ", ") {
					if name != "" {
						key = name + "." + key
					}
					msg := fmt.Sprintf("unknown key %q", key)
					if path != "" {
						msg += " in " + path
					}
					msgs = append(msgs, msg)
				}
				return
			}
			msgs = append(msgs, name+" "+inner)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if e := errors.Unwrap(err); e != nil && strings.HasPrefix(err.Error(), "decoding failed") {
			walk(e)
			return
		}
		msgs = append(msgs, err.Error())
	}
	walk(err)
	return msgs
}
