package idemhttp

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// queryValue returns the value of the one-value query parameter name and
// whether it was given. Given empty ("?queue=") it is no value, not "any":
// a 400 naming it, as given twice ("?queue=a&queue=b"), whose second value
// url.Values.Get would silently drop.
func queryValue(q url.Values, name string) (string, bool, error) {
	if err := queryOnce(q, name); err != nil {
		return "", false, err
	}
	vs, ok := q[name]
	if ok && vs[0] == "" {
		return "", false, invalid(name, "must not be empty (leave the parameter out instead)")
	}
	return q.Get(name), ok, nil
}

// queryOnce refuses the query parameter name given more than once.
func queryOnce(q url.Values, name string) error {
	if len(q[name]) > 1 {
		return invalid(name, "given more than once")
	}
	return nil
}

// queryList returns the items of the list parameter name, comma-separated
// ("a,b"), repeated ("?state=a&state=b") or both; white space around an
// item is dropped. An empty item ("a,", ",a", "a,,b", an empty value) is a
// 400 naming it: it names nothing, and dropping it silently took
// "?state=dead," for "?state=dead".
func queryList(q url.Values, name string) ([]string, error) {
	var out []string
	for _, v := range q[name] {
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				return nil, invalid(name, "an empty item in the list (leave the parameter out for no filter)")
			}
			out = append(out, item)
		}
	}
	return out, nil
}

// queryItems returns the values of the repeated parameter name (not split
// at commas), each of which must be non-empty.
func queryItems(q url.Values, name string) ([]string, error) {
	for _, v := range q[name] {
		if v == "" {
			return nil, invalid(name, "an empty value (leave the parameter out for no filter)")
		}
	}
	return q[name], nil
}

// unknownQuery refuses the parameters of q that are not in allowed: a 400
// naming each, its detail listing those the route takes.
func unknownQuery(q url.Values, allowed []string) error {
	var unknown []string
	for name := range q {
		if !slices.Contains(allowed, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	msg := "unknown query parameter; this endpoint takes none"
	if len(allowed) > 0 {
		msg = "unknown query parameter; this endpoint takes " + strings.Join(allowed, ", ")
	}
	p := newProblem(http.StatusBadRequest, ProblemInvalid, "Invalid request", strings.Join(unknown, ", ")+": "+msg)
	p.Errors = make(map[string]string, len(unknown))
	for _, name := range unknown {
		p.Errors[name] = msg
	}
	return p
}
