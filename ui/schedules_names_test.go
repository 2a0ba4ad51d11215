package ui_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)"[^>]*>(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	labelRE  = regexp.MustCompile(`aria-label="([^"]*)"`)
)

// browserForm finds the form of page whose button is labelled label and
// returns the URL a browser posts it to (dot segments removed, "%2e" being
// a dot to a browser too) and its hidden fields.
func browserForm(t *testing.T, base, page, label string) (string, url.Values) {
	t.Helper()
	for _, m := range formRE.FindAllStringSubmatch(page, -1) {
		l := labelRE.FindStringSubmatch(m[2])
		if l == nil || html.UnescapeString(l[1]) != label {
			continue
		}
		form := url.Values{}
		for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			form.Add(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
		}
		action := html.UnescapeString(m[1])
		u, err := url.Parse(regexp.MustCompile(`(?i)%2e`).ReplaceAllString(action, "."))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := url.Parse(base + "/ui/schedules")
		return b.ResolveReference(u).RequestURI(), form
	}
	t.Fatalf("no form labelled %q:\n%s", label, page)
	return "", nil
}

// TestScheduleNamesWithDotsAndSlashes: Trigger now and Delete work for
// every valid schedule name, "." and ".." included. The name was a path
// segment of the form's action, which a browser removes ("/ui/schedules/
// ../trigger" is "/ui/trigger"), so those schedules could be neither
// triggered nor deleted from the page.
func TestScheduleNamesWithDotsAndSlashes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	cl := e.api(e.keyA)
	every := "1h"
	names := []string{".", "..", "a/b", "x?y#z", "%2e", "plain"}
	for _, n := range names {
		if _, err := cl.PutSchedule(ctx, n, &idemclient.ScheduleRequest{Every: &every, Kind: "k"}); err != nil {
			t.Fatalf("put %q: %v", n, err)
		}
	}
	c := e.login(e.keyA)
	for _, n := range names {
		page := body(t, e.get("/ui/schedules", c))
		path, form := browserForm(t, e.srv.URL, page, "Trigger now: "+n)
		res := e.post(path, form, e.sameOrigin(), c)
		loc := res.Header.Get("Location")
		if res.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "triggered=") {
			t.Errorf("Trigger now of %q (POST %s): %d to %q", n, path, res.StatusCode, loc)
		}
		path, form = browserForm(t, e.srv.URL, page, "Delete schedule: "+n)
		if res := e.post(path, form, e.sameOrigin(), c); res.StatusCode != http.StatusSeeOther {
			t.Errorf("Delete of %q (POST %s): %d", n, path, res.StatusCode)
		}
	}
	left, err := cl.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range left {
		t.Errorf("schedule %q not deleted", s.Name)
	}
}
