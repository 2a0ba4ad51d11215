package key

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// TestNumberFormat checks the ECMAScript number serialization against the
// table of RFC 8785 appendix B (IEEE 754 bit patterns) and threshold cases.
func TestNumberFormat(t *testing.T) {
	t.Parallel()
	bits := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, c := range bits {
		if got := string(appendNumber(nil, math.Float64frombits(c.bits))); got != c.want {
			t.Errorf("%#016x: got %s want %s", c.bits, got, c.want)
		}
	}
	texts := []struct{ in, want string }{
		{"-1.5", "-1.5"},
		{"123e-20", "1.23e-18"},
		{"0.0000001234", "1.234e-7"},
		{"0.000001234", "0.000001234"},
		{"-1e21", "-1e+21"},
		{"12.5e20", "1.25e+21"},
		{"1E400000000000000000000", ""},
		{"1e-400", "0"},
		{"-1e-400", "0"},
		{"100e-2", "1"},
	}
	for _, c := range texts {
		got, err := Canonicalize([]byte(c.in))
		if c.want == "" {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Errorf("%s: want ErrInvalidJSON, got %q, %v", c.in, got, err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %q, %v want %s", c.in, got, err, c.want)
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	// In UTF-16 order, U+1F600 (surrogates D83D DE00) sorts before U+FB33
	// and U+E000, although its code point is larger.
	ordered := []string{"", "\r", "1", "a", "ab", "\u0080", "\u00f6", "\u20ac", "\U0001F600", "\U0001F600a", "\U0010FFFF", "\ue000", "\ufb33", "\uffff"}
	for i := range ordered {
		for j := range ordered {
			got := compareUTF16([]byte(ordered[i]), []byte(ordered[j]))
			switch {
			case i < j && got >= 0, i > j && got <= 0, i == j && got != 0:
				t.Errorf("compare(%q, %q) = %d", ordered[i], ordered[j], got)
			}
		}
	}
}

func TestStringEscapes(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`"\u0000\u001f\u0020"`, `"\u0000\u001f "`},
		{`"\/\u002F<>&\u003c"`, `"//<>&<"`},
		{`"\u00E9\u00e9é"`, `"ééé"`},
		{`"\uD834\uDD1E"`, `"𝄞"`},
		{"\"\u2028\u2029\"", "\"\u2028\u2029\""},
		{`"\u007f"`, "\"\x7f\""},
	}
	for _, c := range cases {
		got, err := Canonicalize([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %q, %v want %q", c.in, got, err, c.want)
		}
	}
}

func TestSets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		sets     []string
		want     string
	}{
		{"no options keeps order", `{"tags":["b","a"]}`, nil, `{"tags":["b","a"]}`},
		{"member", `{"tags":["b","a","b"],"list":["b","a"]}`, []string{"/tags"}, `{"list":["b","a"],"tags":["a","b","b"]}`},
		{"root", `[3,1,2,10]`, []string{""}, `[1,10,2,3]`},
		{"objects sorted by canonical bytes", `{"project_definitions":[{"pages":[4,5],"name":"South"},{"name":"North","pages":[1,2,3]}]}`,
			[]string{"/project_definitions"}, `{"project_definitions":[{"name":"North","pages":[1,2,3]},{"name":"South","pages":[4,5]}]}`},
		{"wildcard member", `{"a":{"x":[2,1]},"b":{"x":[4,3]}}`, []string{"/*/x"}, `{"a":{"x":[1,2]},"b":{"x":[3,4]}}`},
		{"wildcard index and nested set", `{"d":[{"p":[2,1]},{"p":[9,8]}]}`, []string{"/d", "/d/*/p"}, `{"d":[{"p":[1,2]},{"p":[8,9]}]}`},
		{"index", `[[2,1],[2,1]]`, []string{"/1"}, `[[2,1],[1,2]]`},
		{"index does not match inside a set", `[[2,1],[4,3]]`, []string{"", "/0"}, `[[2,1],[4,3]]`},
		{"escaped pointer", `{"a/b":[2,1],"m~n":[2,1]}`, []string{"/a~1b", "/m~0n"}, `{"a/b":[1,2],"m~n":[1,2]}`},
		{"non-array ignored", `{"tags":{"b":1,"a":2}}`, []string{"/tags", "/missing"}, `{"tags":{"a":2,"b":1}}`},
	}
	for _, c := range cases {
		got, err := CanonicalizeWith([]byte(c.in), &Options{Sets: c.sets})
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s, %v want %s", c.name, got, err, c.want)
		}
	}
	// Order independence of a seed 001 payload.
	o := &Options{Sets: []string{"/project_definitions"}}
	h1, err1 := HashWith([]byte(`{"project_definitions":[{"name":"North"},{"name":"South"}]}`), o)
	h2, err2 := HashWith([]byte(`{"project_definitions":[{"name":"South"},{"name":"North"}]}`), o)
	if err1 != nil || err2 != nil || h1 != h2 {
		t.Fatalf("set order changed the hash: %s %s %v %v", h1, h2, err1, err2)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 2, 6, 14, 5, 9, 0, time.UTC)
	ok := []byte(`{"a":1}`)
	cases := []struct {
		name string
		call func() error
		want error
	}{}
	invalidJSON := []string{
		"", " ", "{", "}", "[1,]", "[,1]", `{"a":1,}`, `{"a"}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`,
		"01", "-", "1.", ".5", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity", "1e400", "-1e309",
		"tru", "nul", "True", "[1] [2]", "1 2", `{"a":1}x`, "\ufeff{}", "'a'",
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"x":{"b":1,"b":1}}`,
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800x"`, `"\udc00\ud800"`, `"\ud800\ud800"`,
		"\"\xff\"", "\"\xed\xa0\x80\"", "\"a\x01\"", "\"tab\there\"", `"\x"`, `"\u12"`, `"\u12g4"`, `"abc`, `"\`,
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	}
	for _, in := range invalidJSON {
		cases = append(cases, struct {
			name string
			call func() error
			want error
		}{"json " + in[:min(len(in), 20)], func() error { _, err := Canonicalize([]byte(in)); return err }, ErrInvalidJSON})
	}
	add := func(name string, want error, call func() error) {
		cases = append(cases, struct {
			name string
			call func() error
			want error
		}{name, call, want})
	}
	add("bad set pointer", ErrInvalidPart, func() error { _, err := CanonicalizeWith(ok, &Options{Sets: []string{"tags"}}); return err })
	add("bad set escape", ErrInvalidPart, func() error { _, err := CanonicalizeWith(ok, &Options{Sets: []string{"/a~2"}}); return err })
	add("hash invalid json", ErrInvalidJSON, func() error { _, err := Hash([]byte("{")); return err })
	add("empty prefix", ErrInvalidPart, func() error { _, err := Prefixed("", ok); return err })
	add("control in prefix", ErrInvalidPart, func() error { _, err := Prefixed("ba\ntch", ok); return err })
	add("prefixed invalid payload", ErrInvalidJSON, func() error { _, err := Prefixed("batch", []byte("[")); return err })
	add("empty action", ErrInvalidPart, func() error { _, err := Scoped("t", "u", "", ok); return err })
	add("separator in tenant", ErrInvalidPart, func() error { _, err := Scoped("t_1", "u", "a", ok); return err })
	add("separator in user", ErrInvalidPart, func() error { _, err := Scoped("t", "u_1", "a", ok); return err })
	add("control in action", ErrInvalidPart, func() error { _, err := Scoped("t", "u", "a\x00", ok); return err })
	add("invalid utf8 in user", ErrInvalidPart, func() error { _, err := Scoped("t", "\xff", "a", ok); return err })
	add("scoped invalid payload", ErrInvalidJSON, func() error { _, err := Scoped("t", "u", "a", []byte(`{"a":1,"a":1}`)); return err })
	add("bad grain", ErrInvalidPart, func() error { _, err := ParseGrain("week"); return err })
	add("empty grain", ErrInvalidPart, func() error { _, err := ParseGrain(""); return err })
	add("case grain", ErrInvalidPart, func() error { _, err := ParseGrain("Day"); return err })
	add("lock unknown grain", ErrInvalidPart, func() error { _, err := Lock("f", "t", at, nil, Grain("year"), nil); return err })
	add("lock empty function", ErrInvalidPart, func() error { _, err := Lock("", "t", at, nil, GrainDay, nil); return err })
	add("lock empty tenant", ErrInvalidPart, func() error { _, err := Lock("f", "", at, nil, GrainDay, nil); return err })
	add("lock separator in tenant", ErrInvalidPart, func() error { _, err := Lock("f", "a:b", at, nil, GrainDay, nil); return err })
	add("lock separator in function", ErrInvalidPart, func() error { _, err := Lock("f:x", "t", at, nil, GrainDay, nil); return err })
	add("lock control in tenant", ErrInvalidPart, func() error { _, err := Lock("f", "t\u0085", at, nil, GrainDay, nil); return err })
	add("lock zero time", ErrInvalidPart, func() error { _, err := Lock("f", "t", time.Time{}, nil, GrainDay, nil); return err })
	add("lock entities not an object", ErrInvalidPart, func() error { _, err := Lock("f", "t", at, nil, GrainDay, []byte(`[1]`)); return err })
	add("lock invalid entities", ErrInvalidJSON, func() error { _, err := Lock("f", "t", at, nil, GrainDay, []byte("{x}")); return err })
	add("canonical value NaN", nil, func() error { _, err := CanonicalValue(math.NaN()); return err })

	for _, c := range cases {
		err := c.call()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: error %v does not wrap %v", c.name, err, c.want)
		}
		if c.want != nil && !errors.Is(err, idemtype.ErrInvalid) {
			t.Errorf("%s: error %v does not wrap idemtype.ErrInvalid", c.name, err)
		}
	}
}

func TestLockGrainsAndZones(t *testing.T) {
	t.Parallel()
	tm := time.Date(2026, 2, 6, 23, 59, 30, 0, time.UTC)
	tokyo := time.FixedZone("JST", 9*3600)
	cases := []struct {
		g    Grain
		loc  *time.Location
		ent  []byte
		want string
	}{
		{GrainDay, nil, nil, "f:t:2026-02-06"},
		{GrainDay, tokyo, nil, "f:t:2026-02-07"},
		{GrainHour, tokyo, []byte(" null "), "f:t:2026-02-07T08"},
		{GrainMinute, time.UTC, []byte{}, "f:t:2026-02-06T23:59"},
		{GrainDay, nil, []byte(`{"rule_id":"r123","sku":"SKU001"}`), "f:t:2026-02-06:971121298e66"},
	}
	for _, c := range cases {
		got, err := Lock("f", "t", tm, c.loc, c.g, c.ent)
		if err != nil || got != c.want {
			t.Errorf("%s %v: got %q, %v want %q", c.g, c.loc, got, err, c.want)
		}
	}
}

func TestCanonicalValue(t *testing.T) {
	t.Parallel()
	got, err := CanonicalValue(map[string]any{"b": []int{1, 2}, "a": "<&>", "c": 1.0})
	if err != nil || string(got) != `{"a":"<&>","b":[1,2],"c":1}` {
		t.Fatalf("got %s, %v", got, err)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	k := Versioned("batch_abc")
	if k != "v1:batch_abc" {
		t.Fatalf("Versioned = %q", k)
	}
	v, rest, ok := SplitVersion(k)
	if !ok || v != Version || rest != "batch_abc" {
		t.Fatalf("SplitVersion(%q) = %q %q %v", k, v, rest, ok)
	}
	for _, k := range []string{"detect-alerts:t:2026-02-06", "batch_abc", "v:x", "vx1:y", ""} {
		if v, rest, ok := SplitVersion(k); ok || rest != k || v != "" {
			t.Errorf("SplitVersion(%q) = %q %q %v, want untagged", k, v, rest, ok)
		}
	}
}
