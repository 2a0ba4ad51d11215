package key

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalize checks that Canonicalize never panics, accepts only
// valid JSON, and that its output is a fixed point that does not depend on
// how the same value is written (member order, escapes, number spelling,
// whitespace).
func FuzzCanonicalize(f *testing.F) {
	if b, err := os.ReadFile(localVectors); err == nil {
		var v vectorFile
		if err := json.Unmarshal(b, &v); err == nil {
			for _, c := range v.Canonical {
				f.Add([]byte(c.Input))
			}
			for _, c := range v.Formats {
				if c.Payload != nil {
					f.Add([]byte(*c.Payload))
				}
				if c.Entities != nil {
					f.Add([]byte(*c.Entities))
				}
			}
		}
	}
	for _, s := range []string{`{"a":1,"a":2}`, `"\ud800"`, `[1e400]`, `{"\ue000":1,"\ud83d\ude00":2}`, `[-0.0,1E-7,1e21]`, "\"\x7f\u2028\"", `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonicalize(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input encoding/json rejects: %q", data)
		}
		if !utf8.Valid(c) || !json.Valid(c) {
			t.Fatalf("invalid output %q", c)
		}
		again, err := Canonicalize(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point:\n in  %q\n c1  %q\n c2  %q (%v)", data, c, again, err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("encoding/json cannot decode accepted input %q: %v", data, err)
		}
		for _, mode := range []int{0, 1} {
			var buf bytes.Buffer
			reencode(&buf, v, mode)
			got, err := Canonicalize(buf.Bytes())
			if err != nil || !bytes.Equal(got, c) {
				t.Fatalf("re-encoding changed the canonical form:\n in  %q\n re  %q\n c   %q\n got %q (%v)", data, buf.Bytes(), c, got, err)
			}
		}
	})
}

// reencode writes v as JSON with object members in reverse order and, in
// mode 1, with whitespace and numbers spelled differently.
func reencode(buf *bytes.Buffer, v any, mode int) {
	sp := func() {
		if mode == 1 {
			buf.WriteString(" \n\t")
		}
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			sp()
			kb, _ := json.Marshal(k) // escapes <, >, & and U+2028 differently
			buf.Write(kb)
			sp()
			buf.WriteByte(':')
			reencode(buf, v[k], mode)
		}
		sp()
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			sp()
			reencode(buf, e, mode)
		}
		buf.WriteByte(']')
	case json.Number:
		if mode == 1 {
			f, _ := strconv.ParseFloat(string(v), 64)
			buf.WriteString(strconv.FormatFloat(f, 'E', -1, 64))
		} else {
			buf.WriteString(string(v))
		}
	default:
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
}

// FuzzNumber checks that every finite double is printed in the ECMAScript
// grammar and parses back to the same double.
func FuzzNumber(f *testing.F) {
	for _, x := range []float64{0, 1, -1, 0.1, 1e21, 1e-7, 5e-324, math.MaxFloat64, 123456789012345680000} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		s := appendNumber(nil, x)
		back, err := strconv.ParseFloat(string(s), 64)
		if err != nil || back != x && !(x == 0 && back == 0) {
			t.Fatalf("%v (%#x) printed as %s, parsed back as %v (%v)", x, bits, s, back, err)
		}
		c, err := Canonicalize(s)
		if err != nil || !bytes.Equal(c, s) {
			t.Fatalf("%s is not canonical: %s %v", s, c, err)
		}
	})
}
