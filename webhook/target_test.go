package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCheckURLWithLiteralAddresses(t *testing.T) {
	t.Parallel()
	open, err := NewSender(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open.Close)
	strict, err := NewSender(&Config{DenyPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(strict.Close)
	ctx := context.Background()
	for _, tc := range []struct {
		url          string
		open, strict error // nil = accepted
	}{
		{"http://127.0.0.1:9/hook", nil, ErrForbiddenAddress},
		{"https://[::1]/hook", nil, ErrForbiddenAddress},
		{"http://10.1.2.3/hook", nil, ErrForbiddenAddress},
		{"http://192.168.0.10/hook", nil, ErrForbiddenAddress},
		{"http://93.184.215.14/hook", nil, nil}, // a public address
		{"ftp://127.0.0.1/hook", ErrInvalidURL, ErrInvalidURL},
		{"/relative/hook", ErrInvalidURL, ErrInvalidURL},
		{"http:///no-host", ErrInvalidURL, ErrInvalidURL},
		{"http://[::1", ErrInvalidURL, ErrInvalidURL},
		{"", ErrInvalidURL, ErrInvalidURL},
	} {
		for name, c := range map[string]struct {
			s    *Sender
			want error
		}{"default": {open, tc.open}, "deny private": {strict, tc.strict}} {
			err := c.s.CheckURL(ctx, tc.url)
			if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Errorf("%s: CheckURL(%q) = %v, want %v", name, tc.url, err, c.want)
			}
		}
	}
}

// TestInvalidURLDoesNotLeakCredentials: the error of a refused URL never
// carries the password it may hold (it ends up in logs and API replies).
func TestInvalidURLDoesNotLeakCredentials(t *testing.T) {
	t.Parallel()
	s, err := NewSender(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	err = s.CheckURL(context.Background(), "ftp://deploy:s3cr3t-token@127.0.0.1/hook")
	if !errors.Is(err, ErrInvalidURL) || strings.Contains(err.Error(), "s3cr3t-token") {
		t.Fatalf("error %q", err)
	}
}

// TestTargetKeyNormalizes: one target, however its URL is spelled, shares
// one concurrency cap.
func TestTargetKeyNormalizes(t *testing.T) {
	t.Parallel()
	key := func(raw string) string {
		t.Helper()
		u, err := parseTarget(raw)
		if err != nil {
			t.Fatal(err)
		}
		return targetKey(u)
	}
	same := [][]string{
		{"http://Example.COM/a", "http://example.com:80/b", "http://example.com/c?x=1"},
		{"https://example.com/", "https://EXAMPLE.com:443/other"},
		{"http://[::1]:8080/a", "http://[::1]:8080/b"},
	}
	for _, group := range same {
		for _, u := range group[1:] {
			if key(u) != key(group[0]) {
				t.Errorf("%s and %s have different caps: %s, %s", group[0], u, key(group[0]), key(u))
			}
		}
	}
	for _, pair := range [][2]string{
		{"http://example.com/", "https://example.com/"},
		{"http://example.com/", "http://example.com:8080/"},
		{"http://a.example.com/", "http://b.example.com/"},
	} {
		if key(pair[0]) == key(pair[1]) {
			t.Errorf("%s and %s share a cap", pair[0], pair[1])
		}
	}
}
