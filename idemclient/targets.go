package idemclient

import (
	"context"
	"net/http"

	"github.com/idem-dev/idem/idemhttp/wire"
)

// Target is a delivery target as the API shows it (never its secrets;
// Secret holds a generated one in the reply that created it).
type Target = wire.Target

// TargetPut is the body of PutTarget. Secrets nil: the server generates one
// and returns it once when it creates the target, and keeps the stored
// secrets when it replaces it (so retrying or re-applying a PutTarget never
// rotates them); given secrets replace them; a pointer to an empty slice:
// unsigned pushes.
type TargetPut = wire.TargetPut

// PutTarget creates or replaces the target name; created reports a 201. A
// nil t is sent as an empty one: the server names what is missing.
func (cl *Client) PutTarget(ctx context.Context, name string, t *TargetPut) (out *Target, created bool, err error) {
	if t == nil {
		t = &TargetPut{} // not null, which the server refuses as such
	}
	out = new(Target)
	status, err := cl.do(ctx, &call{method: http.MethodPut, path: targetPath(name), body: t, out: out})
	if err != nil {
		return nil, false, err
	}
	return out, status == http.StatusCreated, nil
}

// Targets lists the delivery targets of the tenant.
func (cl *Client) Targets(ctx context.Context) ([]*Target, error) {
	var out wire.TargetList
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/targets", out: &out})
	return out.Targets, err
}

// Target returns the target name (never its secrets); ErrNotFound when
// there is none.
func (cl *Client) Target(ctx context.Context, name string) (*Target, error) {
	var out Target
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: targetPath(name), out: &out})
	return nilIfErr(&out, err)
}

// DeleteTarget deletes the target name.
//
// A retry after a lost reply that finds it gone (404) reports success: the
// earlier attempt may have deleted it. So nil means "it is gone", and
// ErrNotFound is reported only when the first attempt answers 404.
func (cl *Client) DeleteTarget(ctx context.Context, name string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: targetPath(name)})
	return err
}

func targetPath(name string) string { return "/v1/targets/" + pathSegment(name) }
