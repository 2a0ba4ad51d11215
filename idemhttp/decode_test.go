package idemhttp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/key"
)

// TestExplicitZero: a field set to 0 is seen however its key is spelled;
// an absent field, another value or the name as a value is not.
func TestExplicitZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"kind":"a"}`, false},
		{`{"kind":"a","max_attempts":0}`, true},
		{`{"kind":"a","max_attempts":0.0}`, true},
		{`{"kind":"a","max_attempts":-0}`, true},
		{`{"kind":"a","max_attempts":3}`, false},
		{`{"kind":"a","max_attempts":null}`, false},
		{`{"kind":"max_attempts"}`, false},
		{`{"kind":"a","max\u005fattempts":0}`, true},
		{`{"kind":"a\"","max_attempts":0}`, true},
		{`{"kind":"a\n"}`, false},
		{`{"kind":"a","max_attempts":0`, false}, // not JSON: the decoder reports it
	} {
		if got := explicitZero([]byte(tc.body), "max_attempts"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.body, got, tc.want)
		}
	}
}

// FuzzExplicitZero: the shortcut never changes the answer.
func FuzzExplicitZero(f *testing.F) {
	for _, s := range []string{`{"max_attempts":0}`, `{"max\u005fattempts":0}`, `{"limit":0,"x":"\\"}`, `{"kind":"k"}`, `[0]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, field := range []string{"max_attempts", "limit"} {
			if got, want := explicitZero(body, field), decodedZero(body, field); got != want {
				t.Fatalf("%q %s: %v, want %v", body, field, got, want)
			}
		}
	})
}

// TestDuplicateName: the path of the first repeated member name, decoded
// names compared, through objects and arrays at any depth.
func TestDuplicateName(t *testing.T) {
	t.Parallel()
	many := `{`
	for i := range 40 {
		many += `"k` + strconv.Itoa(i) + `":{"k0":[]},`
	}
	for _, tc := range []struct {
		body, want string
		dup        bool
	}{
		{`{"a":1,"b":2}`, "", false},
		{`{"a":1,"a":1}`, "a", true},
		{`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, "", false},
		{` { "a" : [ 1 , { "x" : 1 , "y" : 2 , "x" : 3 } ] } `, "a[1].x", true},
		{`{"a":"}\"{","b":"\\","a":0}`, "a", true},
		{`{"\u0061":1,"a":2}`, "a", true},
		{`{"é":1,"\u00e9":2}`, "é", true},
		{`{"":1,"":2}`, "", true},
		{`[[],{},[{"x":null,"x":true}]]`, "[2][0].x", true},
		{`{"a":[],"b":{},"a":{}}`, "a", true},
		{many + `"k3":1}`, "k3", true},
		{many + `"z":{"k3":1,"k3":2}}`, "z.k3", true},
		{many + `"z":1}`, "", false},
		{`"a"`, "", false},
		{`12`, "", false},
	} {
		got, dup := duplicateName([]byte(tc.body))
		if got != tc.want || dup != tc.dup {
			t.Errorf("%.60s: %q %v, want %q %v", tc.body, got, dup, tc.want, tc.dup)
		}
	}
}

// TestEnvelopeNames: the members of the outermost object only are
// compared; the values are passed over unread, whatever they hold.
func TestEnvelopeNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, want string
		dup        bool
	}{
		{`{"jobs":[{"a":1,"a":2}]}`, "", false},
		{`{"jobs":[{"kind":"a"}],"jobs":[]}`, "jobs", true},
		{` { "jobs" : [ { "s" : "]}\"{[" } , "x" ] , "n" : -1.5e3 , "t" : true , "jobs" : null } `, "jobs", true},
		{`{"a":"}\"{","b":{"b":1,"b":2},"c":[[],{}],"a":0}`, "a", true},
		{`{"\u006aobs":1,"jobs":2}`, "jobs", true},
		{`{"a":1,"b":2}`, "", false},
		{`[{"a":1,"a":2}]`, "[0].a", true}, // not an object: scanned as memberNames does
	} {
		got, dup, _ := envelopeNames([]byte(tc.body))
		if got != tc.want || dup != tc.dup {
			t.Errorf("%.60s: %q %v, want %q %v", tc.body, got, dup, tc.want, tc.dup)
		}
	}
}

// FuzzEnvelopeNames: on a JSON object, envelopeNames finds the first
// repeated member name of the object itself exactly as a decoder reading
// its members one by one does, whatever the values hold.
func FuzzEnvelopeNames(f *testing.F) {
	for _, s := range []string{`{"jobs":[{"a":1,"a":2}]}`, `{"jobs":[],"jobs":[]}`, `{"a":"}\"","b":[{"a":1}],"a":{}}`,
		`{"\u0061":1,"a":2}`, `{"a":-1.5e3,"b":true,"c":null,"b":"x"}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantDup, ok := topLevelDuplicate(body)
		if !ok {
			return // not a JSON object
		}
		got, dup, _ := envelopeNames(body)
		if got != want || dup != wantDup {
			t.Fatalf("%q: %q %v, want %q %v", body, got, dup, want, wantDup)
		}
	})
}

// topLevelDuplicate reads the members of the JSON object body one by one
// and returns the first name an earlier member has; ok is false when body
// is not one JSON object.
func topLevelDuplicate(body []byte) (name string, dup, ok bool) {
	if !json.Valid(body) {
		return "", false, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false, false
		}
		k, _ := tok.(string)
		if seen[k] && !dup {
			name, dup = k, true
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false, false
		}
	}
	return name, dup, true
}

// FuzzDuplicateName: on JSON that key.Check accepts or refuses for a
// duplicate only, duplicateName finds a duplicate exactly when key.Check
// refuses; on anything else it ends without panicking.
func FuzzDuplicateName(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1}]},"c":1}`, `{"\u0061":1,"a":2}`, `[{},{"x":1,"y":2,"x":3}]`, `{"a":`, `[}`, `{,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, dup := duplicateName(body)
		if !json.Valid(body) {
			return
		}
		err := key.Check(body, 0)
		if err != nil && !strings.Contains(err.Error(), "duplicate member name") {
			return
		}
		if dup != (err != nil) {
			t.Fatalf("%q: duplicate %v, key.Check %v", body, dup, err)
		}
	})
}

// TestFoldableName: only a member name that could match a field
// case-insensitively sends a body to the second, exact-name read; upper
// case in values does not.
func TestFoldableName(t *testing.T) {
	for body, want := range map[string]bool{
		`{"kind":"k","args":{"to":"A@Example.com"}}`: false,
		`{"KIND":"k"}`:                      true,
		`{"args":{"userId":1}}`:             true,
		`{"\u006bind":"k"}`:                 true,
		`{"kind":"\u212a"}`:                 false,
		`{"a":"x\":","B" : 1}`:              true,
		`{"a":"x\":","b":"Ü"}`:              false,
		`{"k\u00e9":1}`:                     true,
		`["A","B"]`:                         false,
		`{"a":{"b":[{"c":"D"}]},"e":"F:G"}`: false,
	} {
		if got := foldableName([]byte(body)); got != want {
			t.Errorf("foldableName(%s) = %v, want %v", body, got, want)
		}
	}
}

// BenchmarkMemberNamesEscapedValues: the member-name pass over a body
// whose 60 string values hold escapes (values are passed over, not
// decoded: only names are compared).
func BenchmarkMemberNamesEscapedValues(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"kind":"send","args":{`)
	for i := range 60 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"f` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)) +
			`":"line one\nline \"two\"\tend \u00e9"`)
	}
	sb.WriteString(`}}`)
	body := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, dup, _ := memberNames(body); dup {
			b.Fatal("a duplicate in a body without one")
		}
	}
}

// FuzzParseSFString: a quoted Idempotency-Key reads back the key that was
// quoted (printable ASCII, '"' and '\' escaped), and any value either
// parses to printable ASCII or is refused with a problem naming the
// header, without panicking.
func FuzzParseSFString(f *testing.F) {
	for _, s := range []string{`"a\"b"`, `"c\\d"`, `"a\x"`, `"a"b"`, `"abc`, `"a"; p=1`, `""`, `"\"`, "\"a\tb\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		printable := true
		for i := 0; i < len(s); i++ {
			printable = printable && s[i] >= 0x20 && s[i] <= 0x7e
		}
		if printable {
			quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
			if got, err := parseSFString(quoted); err != nil || got != s {
				t.Fatalf("parseSFString(%q) = %q, %v; want %q", quoted, got, err, s)
			}
		}
		in := `"` + s
		got, err := parseSFString(in)
		if err != nil {
			if p, ok := err.(*Problem); !ok || p.Errors[headerIdempotencyKey] == "" {
				t.Fatalf("parseSFString(%q): %v, not a problem naming the header", in, err)
			}
			return
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] > 0x7e {
				t.Fatalf("parseSFString(%q) = %q: not printable ASCII", in, got)
			}
		}
	})
}
