package key

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemtype"
)

// sentinel is an error value that unwraps to a parent sentinel, so that
// errors.Is matches both.
type sentinel struct {
	msg    string
	parent error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.parent }

var (
	// ErrInvalidJSON is wrapped by every error about input that is not
	// strict JSON (or not canonicalizable: duplicate member names, lone
	// surrogates, numbers outside the double range). It wraps
	// idemtype.ErrInvalid.
	ErrInvalidJSON error = &sentinel{"invalid json", idemtype.ErrInvalid}
	// ErrInvalidPart is wrapped by every error about a key part (prefix,
	// tenant, user, action, function, grain, time, set path). It wraps
	// idemtype.ErrInvalid.
	ErrInvalidPart error = &sentinel{"invalid key part", idemtype.ErrInvalid}
)

// maxDepth bounds the nesting of arrays and objects, as encoding/json does.
const maxDepth = 10000

type kind uint8

const (
	kindNull kind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is one parsed JSON value.
type node struct {
	kind kind
	num  float64  // kindNumber
	str  []byte   // kindString: decoded; aliases the input when unescaped
	arr  []node   // kindArray
	obj  []member // kindObject, sorted by name after parsing
}

type member struct {
	name []byte
	val  node
}

// Canonicalize returns the RFC 8785 (JCS) canonical form of the JSON text
// data. Errors wrap ErrInvalidJSON.
func Canonicalize(data []byte) ([]byte, error) {
	return CanonicalizeWith(data, nil)
}

// CanonicalizeWith is Canonicalize with options; a nil o is the same as
// Canonicalize. Errors wrap ErrInvalidJSON (input) or ErrInvalidPart (a
// malformed set path).
func CanonicalizeWith(data []byte, o *Options) ([]byte, error) {
	var sets []pointer
	if o != nil && len(o.Sets) > 0 {
		var err error
		if sets, err = parseSets(o.Sets); err != nil {
			return nil, err
		}
	}
	v, err := parseDocument(data, 0)
	if err != nil {
		return nil, err
	}
	e := encoder{buf: make([]byte, 0, len(data)), sets: sets}
	e.value(&v)
	return e.buf, nil
}

// Check reports whether data is one strict JSON value that Canonicalize
// accepts (valid UTF-8, no lone surrogates, no duplicate member names,
// numbers within the double range) nested at most maxDepth arrays and
// objects deep (maxDepth <= 0: the parser's own limit). Errors wrap
// ErrInvalidJSON. Inputs that pass Check canonicalize without error, so a
// rule on input is the same whether or not a key is derived from it.
func Check(data []byte, maxDepth int) error {
	_, err := parseDocument(data, maxDepth)
	return err
}

// parseDocument parses data as one JSON value with nothing but white space
// around it, nested at most maxDepth deep (<= 0: the parser's own limit).
func parseDocument(data []byte, maxDepth int) (node, error) {
	p := parser{data: data, depth: maxDepth}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return node{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return node{}, p.errorf("trailing data")
	}
	return v, nil
}

// CanonicalValue returns the canonical form of v as encoded by
// json.Marshal.
func CanonicalValue(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical value: %w", err)
	}
	return Canonicalize(b)
}

// parser is a strict RFC 8259 recursive-descent parser.
type parser struct {
	data []byte
	pos  int
	// depth is the deepest nesting allowed; 0 means maxDepth.
	depth int
	// Scratch stacks for the children of the containers being parsed;
	// each container copies its children into an exactly sized slice.
	nodes   []node
	members []member
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d", ErrInvalidJSON, fmt.Sprintf(format, args...), p.pos)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (node, error) {
	if p.pos >= len(p.data) {
		return node{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.string()
		return node{kind: kindString, str: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		f, err := p.number()
		return node{kind: kindNumber, num: f}, err
	case c == 't':
		return node{kind: kindTrue}, p.literal("true")
	case c == 'f':
		return node{kind: kindFalse}, p.literal("false")
	case c == 'n':
		return node{kind: kindNull}, p.literal("null")
	default:
		return node{}, p.errorf("unexpected character %q", c)
	}
}

// checkDepth fails when depth passes the parser's limit.
func (p *parser) checkDepth(depth int) error {
	limit := p.depth
	if limit <= 0 {
		limit = maxDepth
	}
	if depth > limit {
		return p.errorf("nesting deeper than %d", limit)
	}
	return nil
}

func (p *parser) literal(lit string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
		return p.errorf("invalid literal")
	}
	p.pos += len(lit)
	return nil
}

func (p *parser) object(depth int) (node, error) {
	if err := p.checkDepth(depth); err != nil {
		return node{}, err
	}
	p.pos++ // '{'
	p.skipSpace()
	n := node{kind: kindObject}
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return n, nil
	}
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return node{}, p.errorf("expected member name")
		}
		name, err := p.string()
		if err != nil {
			return node{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return node{}, p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(depth)
		if err != nil {
			return node{}, err
		}
		p.members = append(p.members, member{name: name, val: v})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case '}':
			p.pos++
			n.obj = slices.Clone(p.members[base:])
			slices.SortFunc(n.obj, func(a, b member) int { return compareUTF16(a.name, b.name) })
			for i := 1; i < len(n.obj); i++ {
				if bytes.Equal(n.obj[i].name, n.obj[i-1].name) {
					return node{}, p.errorf("duplicate member name %q", n.obj[i].name)
				}
			}
			return n, nil
		default:
			return node{}, p.errorf("expected ',' or '}'")
		}
	}
}

func (p *parser) array(depth int) (node, error) {
	if err := p.checkDepth(depth); err != nil {
		return node{}, err
	}
	p.pos++ // '['
	p.skipSpace()
	n := node{kind: kindArray}
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return n, nil
	}
	base := len(p.nodes)
	defer func() { p.nodes = p.nodes[:base] }()
	for {
		v, err := p.value(depth)
		if err != nil {
			return node{}, err
		}
		p.nodes = append(p.nodes, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case ']':
			p.pos++
			n.arr = slices.Clone(p.nodes[base:])
			return n, nil
		default:
			return node{}, p.errorf("expected ',' or ']'")
		}
	}
}

// number parses a JSON number strictly and converts it to a double.
func (p *parser) number() (float64, error) {
	start := p.pos
	d := p.data
	if p.pos < len(d) && d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && d[p.pos] >= '1' && d[p.pos] <= '9':
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	default:
		return 0, p.errorf("invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if p.pos >= len(d) || d[p.pos] < '0' || d[p.pos] > '9' {
			return 0, p.errorf("invalid number: digit expected after '.'")
		}
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(d) || d[p.pos] < '0' || d[p.pos] > '9' {
			return 0, p.errorf("invalid number: digit expected in exponent")
		}
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	}
	f, err := strconv.ParseFloat(string(d[start:p.pos]), 64)
	if err != nil || math.IsInf(f, 0) {
		// ParseFloat rounds underflow to zero without error; an error here
		// is an overflow, which no double (and no ECMAScript number) holds.
		p.pos = start
		return 0, p.errorf("number %s out of range", d[start:min(len(d), start+32)])
	}
	return f, nil
}

// string parses a JSON string at p.pos (which holds '"') and returns its
// decoded value, which aliases p.data when the string has no escapes.
func (p *parser) string() ([]byte, error) {
	p.pos++ // opening quote
	start := p.pos
	d := p.data
	// Fast path: no escapes.
	for p.pos < len(d) {
		c := d[p.pos]
		if c == '"' {
			s := d[start:p.pos:p.pos]
			if !utf8.Valid(s) {
				return nil, p.errorf("invalid UTF-8 in string")
			}
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, p.errorf("control character in string")
		}
		p.pos++
	}
	if p.pos >= len(d) {
		return nil, p.errorf("unterminated string")
	}
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return nil, p.errorf("invalid UTF-8 in string")
			}
			p.pos++
			return buf, nil
		case c < 0x20:
			return nil, p.errorf("control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		// Escape sequence.
		if p.pos+1 >= len(d) {
			return nil, p.errorf("unterminated string")
		}
		esc := d[p.pos+1]
		p.pos += 2
		switch esc {
		case '"', '\\', '/':
			buf = append(buf, esc)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, p.errorf("invalid \\u escape")
			}
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00:
				// High surrogate: a low surrogate escape must follow.
				if p.pos+1 >= len(d) || d[p.pos] != '\\' || d[p.pos+1] != 'u' {
					return nil, p.errorf("lone surrogate \\u%04x", r)
				}
				p.pos += 2
				r2, ok := p.hex4()
				if !ok {
					return nil, p.errorf("invalid \\u escape")
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return nil, p.errorf("lone surrogate \\u%04x", r)
				}
				r = utf16.DecodeRune(r, r2)
			case utf16.IsSurrogate(r):
				return nil, p.errorf("lone surrogate \\u%04x", r)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			p.pos -= 2
			return nil, p.errorf("invalid escape %q", esc)
		}
	}
	return nil, p.errorf("unterminated string")
}

// hex4 reads four hex digits at p.pos.
func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.pos += 4
	return r, true
}

// utf16Weight maps a code point to a value whose order is the order of the
// code point's first UTF-16 code unit, with ties between supplementary
// characters broken by code point (which is the order of their surrogate
// pairs). BMP characters from U+E000 sort after every supplementary
// character, whose high surrogates are D800–DBFF.
func utf16Weight(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + 0x200000
	}
	return r
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 section 3.2.3 requires for member names.
func compareUTF16(a, b []byte) int {
	for i, j := 0, 0; ; {
		if i == len(a) || j == len(b) {
			return (len(a) - i) - (len(b) - j) // shorter (exhausted) first
		}
		ca, cb := a[i], b[j]
		if ca < utf8.RuneSelf && cb < utf8.RuneSelf {
			if ca != cb {
				return int(ca) - int(cb)
			}
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRune(a[i:])
		rb, nb := utf8.DecodeRune(b[j:])
		if ra != rb {
			return int(utf16Weight(ra)) - int(utf16Weight(rb))
		}
		i += na
		j += nb
	}
}

// encoder writes the canonical form of a parsed value.
type encoder struct {
	buf  []byte
	sets []pointer
	path []segment // maintained only when sets is non-empty
}

func (e *encoder) value(n *node) {
	switch n.kind {
	case kindNull:
		e.buf = append(e.buf, "null"...)
	case kindFalse:
		e.buf = append(e.buf, "false"...)
	case kindTrue:
		e.buf = append(e.buf, "true"...)
	case kindNumber:
		e.buf = appendNumber(e.buf, n.num)
	case kindString:
		e.buf = appendString(e.buf, n.str)
	case kindArray:
		if len(e.sets) > 0 && e.isSet() {
			e.set(n)
			return
		}
		e.buf = append(e.buf, '[')
		for i := range n.arr {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if len(e.sets) > 0 {
				e.path = append(e.path, segment{index: i, isIndex: true})
			}
			e.value(&n.arr[i])
			if len(e.sets) > 0 {
				e.path = e.path[:len(e.path)-1]
			}
		}
		e.buf = append(e.buf, ']')
	case kindObject:
		e.buf = append(e.buf, '{')
		for i := range n.obj {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			m := &n.obj[i]
			e.buf = appendString(e.buf, m.name)
			e.buf = append(e.buf, ':')
			if len(e.sets) > 0 {
				e.path = append(e.path, segment{name: m.name})
			}
			e.value(&m.val)
			if len(e.sets) > 0 {
				e.path = e.path[:len(e.path)-1]
			}
		}
		e.buf = append(e.buf, '}')
	}
}

// set writes an array declared as a set: elements sorted by their
// canonical bytes, duplicates kept.
func (e *encoder) set(n *node) {
	elems := make([][]byte, len(n.arr))
	outer := e.buf
	e.path = append(e.path, segment{inSet: true})
	for i := range n.arr {
		e.buf = nil
		e.value(&n.arr[i])
		elems[i] = e.buf
	}
	e.path = e.path[:len(e.path)-1]
	slices.SortFunc(elems, bytes.Compare)
	e.buf = append(outer, '[')
	for i, el := range elems {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, el...)
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) isSet() bool {
	for _, p := range e.sets {
		if p.matches(e.path) {
			return true
		}
	}
	return false
}

// appendNumber appends f formatted as ECMAScript's Number.prototype.toString
// (ECMA-262 Number::toString, RFC 8785 section 3.2.2.3). f is finite.
func appendNumber(buf []byte, f float64) []byte {
	if f == 0 {
		return append(buf, '0') // also -0
	}
	if f < 0 {
		buf = append(buf, '-')
		f = -f
	}
	// Shortest round-trip digits: "d.ddde±x" or "de±x".
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	ePos := bytes.IndexByte(s, 'e')
	mant, exp := s[:ePos], s[ePos+1:]
	var digits [24]byte
	k := 0
	for _, c := range mant {
		if c != '.' {
			digits[k] = c
			k++
		}
	}
	x, _ := strconv.Atoi(string(exp))
	n := x + 1 // value = 0.d1d2…dk × 10^n
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		buf = append(buf, ds...)
		for i := k; i < n; i++ {
			buf = append(buf, '0')
		}
	case 0 < n && n <= 21:
		buf = append(buf, ds[:n]...)
		buf = append(buf, '.')
		buf = append(buf, ds[n:]...)
	case -6 < n && n <= 0:
		buf = append(buf, '0', '.')
		for i := n; i < 0; i++ {
			buf = append(buf, '0')
		}
		buf = append(buf, ds...)
	default:
		buf = append(buf, ds[0])
		if k > 1 {
			buf = append(buf, '.')
			buf = append(buf, ds[1:]...)
		}
		buf = append(buf, 'e')
		if n-1 >= 0 {
			buf = append(buf, '+')
		}
		buf = strconv.AppendInt(buf, int64(n-1), 10)
	}
	return buf
}

// appendString appends s (valid UTF-8) as a JCS string literal.
func appendString[S string | []byte](buf []byte, s S) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
