package key

import (
	"fmt"
	"strconv"
	"strings"
)

// Options changes how a payload is canonicalized. The zero value (and a nil
// *Options) gives plain RFC 8785.
type Options struct {
	// Sets lists JSON Pointers (RFC 6901) to arrays whose order does not
	// matter: their elements are sorted by their own canonical bytes
	// (duplicates are kept). "" is the root; "/tags" is the member "tags"
	// of the root object; "/items/0/tags" walks through array index 0; a
	// segment "*" matches any member name or array index (so a member
	// literally named "*" cannot be addressed alone). Below a set, element
	// positions depend on the input order, so only "*" matches them. A
	// pointer that addresses nothing, or something other than an array, has
	// no effect.
	Sets []string
}

// segment is one step of the path of a value being encoded.
type segment struct {
	name    []byte // object member name
	index   int    // array index when isIndex
	isIndex bool
	inSet   bool // element of a set: only "*" matches
}

// pointer is a parsed JSON Pointer pattern.
type pointer []string

func parseSets(sets []string) ([]pointer, error) {
	ps := make([]pointer, 0, len(sets))
	for _, s := range sets {
		p, err := parsePointer(s)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// parsePointer parses an RFC 6901 JSON Pointer.
func parsePointer(s string) (pointer, error) {
	if s == "" {
		return pointer{}, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("%w: set path %q: must be empty or start with '/'", ErrInvalidPart, s)
	}
	segs := strings.Split(s[1:], "/")
	for i, seg := range segs {
		for j := 0; j < len(seg); j++ {
			if seg[j] == '~' && (j+1 == len(seg) || (seg[j+1] != '0' && seg[j+1] != '1')) {
				return nil, fmt.Errorf("%w: set path %q: '~' must be followed by '0' or '1'", ErrInvalidPart, s)
			}
		}
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
	}
	return pointer(segs), nil
}

// matches reports whether the pattern p addresses path.
func (p pointer) matches(path []segment) bool {
	if len(p) != len(path) {
		return false
	}
	for i, pat := range p {
		if pat == "*" {
			continue
		}
		s := path[i]
		switch {
		case s.inSet:
			return false
		case s.isIndex:
			if pat != strconv.Itoa(s.index) {
				return false
			}
		default:
			if pat != string(s.name) {
				return false
			}
		}
	}
	return true
}
