package idemclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/idem-dev/idem/idemhttp/wire"
)

// Limit is a limit with its current usage.
type Limit = wire.Limit

// LimitRequest sets a rate ("100/1m"), a concurrency, or both.
type LimitRequest = wire.LimitRequest

// LimitScope names what a limit applies to: Tenant alone (every queue),
// Queue alone (every tenant), or both (one tenant's work in one queue).
type LimitScope struct {
	Tenant string
	Queue  string
}

// call returns the API call of method on the scope.
func (s LimitScope) call(method string) *call {
	if s.Tenant == "" {
		return &call{method: method, path: "/v1/limits/queue/" + pathSegment(s.Queue)}
	}
	c := &call{method: method, path: "/v1/limits/tenant/" + pathSegment(s.Tenant)}
	if s.Queue != "" {
		c.query = url.Values{"queue": {s.Queue}}
	}
	return c
}

// LimitPut sets the limit of scope (admin keys only).
func (cl *Client) LimitPut(ctx context.Context, scope LimitScope, req LimitRequest) (*Limit, error) {
	var out Limit
	c := scope.call(http.MethodPut)
	c.body, c.out = req, &out
	_, err := cl.do(ctx, c)
	return nilIfErr(&out, err)
}

// LimitGet returns the limit of scope with its usage.
func (cl *Client) LimitGet(ctx context.Context, scope LimitScope) (*Limit, error) {
	var out Limit
	c := scope.call(http.MethodGet)
	c.out = &out
	_, err := cl.do(ctx, c)
	return nilIfErr(&out, err)
}

// LimitList returns the limits the key may see, with their usage.
func (cl *Client) LimitList(ctx context.Context) ([]Limit, error) {
	var out wire.LimitList
	if _, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/limits", out: &out}); err != nil {
		return nil, err
	}
	return out.Limits, nil
}

// LimitDelete removes the limit of scope (admin keys only).
//
// A retry after a lost reply that finds it gone (404) reports success: the
// earlier attempt may have deleted it. So nil means "it is gone", and
// ErrNotFound is reported only when the first attempt answers 404.
func (cl *Client) LimitDelete(ctx context.Context, scope LimitScope) error {
	_, err := cl.do(ctx, scope.call(http.MethodDelete))
	return err
}

// QueuePause pauses queue on every node: the whole queue, or with tenant
// set (admin keys) that tenant's work in it; a tenant key pauses its own
// work.
func (cl *Client) QueuePause(ctx context.Context, queue, tenant string) (*wire.PauseReply, error) {
	var out wire.PauseReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/queues/" + pathSegment(queue) + "/pause",
		body: wire.PauseRequest{Tenant: tenant}, out: &out})
	return nilIfErr(&out, err)
}

// QueueResume undoes QueuePause.
func (cl *Client) QueueResume(ctx context.Context, queue, tenant string) (*wire.PauseReply, error) {
	var out wire.PauseReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/queues/" + pathSegment(queue) + "/resume",
		body: wire.PauseRequest{Tenant: tenant}, out: &out})
	return nilIfErr(&out, err)
}
