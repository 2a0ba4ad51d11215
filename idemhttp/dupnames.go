package idemhttp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// linearMembers is the number of members of one object whose names are
// compared one by one; a larger object switches to a set.
const linearMembers = 16

// duplicateName finds the first member of an object of the JSON text body
// whose name (after unescaping) an earlier member of the same object
// already has, and returns its path: "kind", "retry.base",
// "jobs[1].queue", "args.x[0].y". encoding/json lets the last of two
// members win, and key.Check (args, metadata, results) refuses them
// without saying where; this one pass covers the whole request body.
// Names are compared in place (decoded only when escaped), so a typical
// body costs two small allocations (the scratch stacks).
// body must be valid JSON (decoded without error); on anything else it
// stops and reports no duplicate.
// It is not key.Check taught to name the path: Check builds the parse
// tree (on an enqueue body 4× the time and 4× the bytes, on a batch of 100
// jobs 3× the time and 125× the bytes), finds a duplicate only when its
// object closes, the first in sorted order, stops at a lone surrogate or a
// number out of range (which encoding/json accepts) before a duplicate
// that follows them, and decodeStrict would still need this pass for
// foldableName.
func duplicateName(body []byte) (string, bool) {
	path, dup, _ := memberNames(body)
	return path, dup
}

// foldableName reports whether a member name of the JSON value body (at
// any depth) holds an upper-case letter, an escape or a non-ASCII byte:
// only such a name can match a field case-insensitively. Values do not
// count, so an upper-case value (an e-mail address, a title) does not send
// a body to a second, exact-name read.
func foldableName(body []byte) bool {
	_, _, foldable := memberNames(body)
	return foldable
}

// memberNames is duplicateName and foldableName in one pass over body's
// member names (foldable is complete only when there is no duplicate).
func memberNames(body []byte) (path string, dup, foldable bool) {
	s := nameScans.Get().(*nameScan)
	s.data, s.pos, s.foldable = body, 0, false
	if !s.value() {
		path, dup = s.pathString(), true
	}
	foldable = s.foldable
	s.release()
	return path, dup, foldable
}

// envelopeNames is memberNames over the members of the outermost object
// of body only: their values are passed over unread. POST /v1/jobs/batch
// reads its body so: each of its items is decoded and checked alone
// (decodeStrict), and one that repeats a member name fails only itself,
// as any other bad item does (API.md), not the whole batch.
func envelopeNames(body []byte) (path string, dup, foldable bool) {
	s := nameScans.Get().(*nameScan)
	s.data, s.pos, s.foldable, s.shallow = body, 0, false, true
	if !s.value() {
		path, dup = s.pathString(), true
	}
	foldable = s.foldable
	s.shallow = false
	s.release()
	return path, dup, foldable
}

// nameScans recycles the scratch stacks of memberNames: on the stack they
// escaped (the scan's recursive methods), about 700 bytes a request body.
var nameScans = sync.Pool{New: func() any {
	return &nameScan{names: make([][]byte, 0, linearMembers+1), path: make([]pathElem, 0, 8)}
}}

// maxPooledScan bounds the stacks a recycled scan keeps (a deeply nested
// body grows them).
const maxPooledScan = 256

// release returns s to nameScans without its references into the body.
func (s *nameScan) release() {
	if cap(s.names) > maxPooledScan || cap(s.path) > maxPooledScan {
		return
	}
	clear(s.names[:cap(s.names)])
	clear(s.path[:cap(s.path)])
	s.data, s.names, s.path = nil, s.names[:0], s.path[:0]
	nameScans.Put(s)
}

// pathElem is one step of a path: a member name or an array index.
type pathElem struct {
	member bool
	name   []byte
	index  int
}

// nameScan is the state of duplicateName.
type nameScan struct {
	data []byte
	pos  int
	// path leads to the value being scanned (to the duplicate when one
	// is found).
	path []pathElem
	// names holds the member names of the open objects, innermost last,
	// while an object has at most linearMembers members.
	names [][]byte
	// foldable: a member name seen so far holds an upper-case letter, an
	// escape or a non-ASCII byte (foldableName).
	foldable bool
	// shallow: the values of the outermost object's members are skipped
	// (envelopeNames).
	shallow bool
}

// pathString formats s.path.
func (s *nameScan) pathString() string {
	var b strings.Builder
	for i, e := range s.path {
		switch {
		case !e.member:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
		case i > 0:
			b.WriteByte('.')
			fallthrough
		default:
			b.Write(e.name)
		}
	}
	return b.String()
}

func (s *nameScan) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *nameScan) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one value; false when it holds a duplicate (s.path then
// leads to it).
func (s *nameScan) value() bool {
	s.skipSpace()
	switch s.peek() {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		s.skipStr() // a value: only names are compared
	default: // a number or a literal
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return true
			}
			s.pos++
		}
	}
	return true
}

func (s *nameScan) object() bool {
	s.pos++ // '{'
	base := len(s.names)
	defer func() { s.names = s.names[:base] }()
	var set map[string]struct{}
	for {
		s.skipSpace()
		if s.peek() != '"' {
			// '}' of an empty object, or input that is not JSON: stop.
			s.pos++
			return true
		}
		start := s.pos
		name := s.str()
		if !s.foldable {
			s.foldable = bytes.ContainsFunc(s.data[start:s.pos], func(r rune) bool {
				return r >= 'A' && r <= 'Z' || r == '\\' || r >= utf8.RuneSelf
			})
		}
		if set != nil {
			if _, ok := set[string(name)]; ok {
				s.path = append(s.path, pathElem{member: true, name: name})
				return false
			}
			set[string(name)] = struct{}{}
		} else {
			for _, n := range s.names[base:] {
				if bytes.Equal(n, name) {
					s.path = append(s.path, pathElem{member: true, name: name})
					return false
				}
			}
			s.names = append(s.names, name)
			if len(s.names)-base > linearMembers {
				set = make(map[string]struct{}, 2*linearMembers)
				for _, n := range s.names[base:] {
					set[string(n)] = struct{}{}
				}
				s.names = s.names[:base]
			}
		}
		s.skipSpace()
		s.pos++ // ':'
		if s.shallow && len(s.path) == 0 {
			s.skipValue()
		} else {
			s.path = append(s.path, pathElem{member: true, name: name})
			if !s.value() {
				return false
			}
			s.path = s.path[:len(s.path)-1]
		}
		if !s.next() {
			return true
		}
	}
}

// next passes the ',' after a member or element (true) or what ends the
// container, '}' or ']' (false).
func (s *nameScan) next() bool {
	s.skipSpace()
	more := s.peek() == ','
	s.pos++
	return more
}

func (s *nameScan) array() bool {
	s.pos++ // '['
	for i := 0; ; i++ {
		s.skipSpace()
		if i == 0 && s.peek() == ']' {
			s.pos++
			return true
		}
		s.path = append(s.path, pathElem{index: i})
		if !s.value() {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		if !s.next() {
			return true
		}
	}
}

// skipValue passes the value at s.pos without looking into it; after it
// s.pos is at what follows the value (or at the ',' or '}' ending a scalar).
func (s *nameScan) skipValue() {
	s.skipSpace()
	depth := 0
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '"':
			s.skipStr()
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return // the end of the object that holds a scalar value
			}
			if depth--; depth == 0 {
				s.pos++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		}
		s.pos++
	}
}

// skipStr passes the string at s.pos (which holds '"') without decoding
// it.
func (s *nameScan) skipStr() {
	s.pos++
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\\':
			s.pos += 2
			continue
		case '"':
			s.pos++
			return
		}
		s.pos++
	}
}

// str scans the string at s.pos (which holds '"') and returns its value:
// the raw bytes when it has no escape, else decoded.
func (s *nameScan) str() []byte {
	start := s.pos
	s.pos++
	escaped := false
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\\':
			escaped = true
			s.pos += 2
			continue
		case '"':
			s.pos++
			if !escaped {
				return s.data[start+1 : s.pos-1]
			}
			var v string
			if json.Unmarshal(s.data[start:s.pos], &v) != nil {
				return s.data[start+1 : s.pos-1]
			}
			return []byte(v)
		}
		s.pos++
	}
	return s.data[start+1:]
}
