package pgstore

import (
	"slices"
	"testing"
)

// A rotation listed ahead of the budget is used only when it is the list
// the budget's exclusions give.
func TestRotationUse(t *testing.T) {
	full := &rotation{queue: "q", limit: 3, excluded: []string{"x"}, tenants: []string{"a", "b", "c"}}
	short := &rotation{queue: "q", limit: 3, excluded: []string{"x"}, tenants: []string{"a", "b"}}
	for _, c := range []struct {
		name     string
		r        *rotation
		queue    string
		limit    int
		excluded []string
		want     []string
		ok       bool
	}{
		{"same exclusions", full, "q", 3, []string{"x"}, []string{"a", "b", "c"}, true},
		{"nil", nil, "q", 3, nil, nil, false},
		{"another queue", full, "r", 3, []string{"x"}, nil, false},
		{"another limit (a later queue of the claim)", full, "q", 2, []string{"x"}, nil, false},
		{"a hinted tenant no longer spent", full, "q", 3, nil, nil, false},
		{"one more spent, full list: relist", full, "q", 3, []string{"b", "x"}, nil, false},
		{"one more spent, short list: drop it", short, "q", 3, []string{"b", "x"}, []string{"a"}, true},
		{"one more spent, not in the list", full, "q", 3, []string{"x", "z"}, []string{"a", "b", "c"}, true},
	} {
		got, ok := c.r.use(c.queue, c.limit, c.excluded)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("%s: use = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
