package idemclient

import (
	"context"
	"net/http"
)

// RevokeAPIKey revokes the API key id (admin keys only): requests with it
// are refused from then on, long polls with it end.
//
// A retry after a lost reply that finds it gone (404) reports success: the
// earlier attempt may have revoked it. So nil means "it is revoked", and
// ErrNotFound is reported only when the first attempt answers 404.
func (cl *Client) RevokeAPIKey(ctx context.Context, id string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: "/v1/apikeys/" + pathSegment(id)})
	return err
}
