package ui_test

import (
	"strings"
	"testing"
)

// TestTenantNamedLikeTheProbeIsNotAdmin: whether a key is an admin key is
// the API's answer about the key, not about a tenant name: the key of a
// tenant literally named idem-ui-admin-probe (the name the dashboard once
// probed with, which such a key may act in) is a tenant key — no switch
// form, no health section — and an admin key is still an admin.
func TestTenantNamedLikeTheProbeIsNotAdmin(t *testing.T) {
	t.Parallel()
	e := setup(t)
	probe := e.login(e.newKey("idem-ui-admin-probe", false))
	for _, path := range []string{"/ui/", "/ui/jobs"} {
		page := body(t, e.get(path, probe))
		if strings.Contains(page, `action="/ui/tenant"`) || !strings.Contains(page, "Tenant key") {
			t.Errorf("%s: the tenant key of idem-ui-admin-probe is shown as an admin key:\n%s", path, page)
		}
	}
	if tc, page := e.switchTenant(t, probe, "a"); tc != nil || !strings.Contains(page, "Only admin keys can switch tenant") {
		t.Errorf("the tenant key of idem-ui-admin-probe switched tenant: cookie %+v\n%s", tc, page)
	}
	admin := e.login(e.admin)
	if page := body(t, e.get("/ui/jobs", admin)); !strings.Contains(page, `action="/ui/tenant"`) {
		t.Errorf("an admin key has no switch form:\n%s", page)
	}
}
