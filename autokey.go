package idem

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store"
)

// DefaultAutoKeyUserField is the metadata field AutoKey reads the user from.
const DefaultAutoKeyUserField = "user"

// AutoKey derives the idempotency key of every job of a queue or kind that
// is enqueued without one (seed 002's middleware: every dispatched job gets
// a key). The key is key.Scoped(tenant, user, action, args):
// "{tenant}_{user}_{action}_{first 16 hex digits of the SHA-256 of the
// canonical args}", so the same args of the same user dedupe within the
// dedup window. Configure it with Config.AutoKeyByQueue or AutoKeyByKind
// (the kind's entry wins).
type AutoKey struct {
	// UserField is the field of the job's metadata (a JSON object) that
	// holds the user; default DefaultAutoKeyUserField. A job without it has
	// an empty user part, as seed 002 renders a null user.
	UserField string
	// Action is the key's action part; default the job's kind.
	Action string
	// NoTenant leaves the tenant part empty (seed 002's null tenant)
	// instead of the job's tenant.
	NoTenant bool
}

// autoKeyFixedLength is the length of a derived key without its action
// and with an empty tenant and user: three underscores and the 16 hex
// digits of the hash.
const autoKeyFixedLength = 3 + 16

// Validate checks that a derives valid keys: an Action, when set, passes
// the checks of key.Scoped and makes keys ValidateKey takes (printable
// ASCII, at most MaxKeyLength bytes with an empty tenant and user). The
// error is an *idemtype.InvalidError naming the field ("action").
// NewClient validates every entry of AutoKeyByQueue and AutoKeyByKind.
func (a AutoKey) Validate() error {
	if a.Action == "" {
		return nil
	}
	k, err := key.Scoped("", "", a.Action, []byte("{}"))
	if err != nil {
		return idemtype.Invalid("action", "%v", err)
	}
	if ValidateKey("action", k) != nil {
		return idemtype.Invalid("action", "%q: want printable ASCII without control characters, at most %d bytes (the key holds it)",
			a.Action, MaxKeyLength-autoKeyFixedLength)
	}
	return nil
}

// validateAutoKeys checks the AutoKey of every queue and kind.
func (c *Config) validateAutoKeys() error {
	for _, by := range []struct {
		what string
		m    map[string]AutoKey
	}{{"queue", c.AutoKeyByQueue}, {"kind", c.AutoKeyByKind}} {
		for name, a := range by.m {
			if err := a.Validate(); err != nil {
				return fmt.Errorf("auto key of %s %q: %w", by.what, name, err)
			}
		}
	}
	return nil
}

// autoKeyFor returns the AutoKey of a job, if any.
func (c *Config) autoKeyFor(queue, kind string) (AutoKey, bool) {
	if a, ok := c.AutoKeyByKind[kind]; ok {
		return a, true
	}
	a, ok := c.AutoKeyByQueue[queue]
	return a, ok
}

// setAutoKey gives p its derived key when p has none and its queue or kind
// is configured for one.
func (c *Config) setAutoKey(p *store.JobInsertParams) error {
	if p.IdempotencyKey != "" {
		return nil
	}
	a, ok := c.autoKeyFor(p.Queue, p.Kind)
	if !ok {
		return nil
	}
	field := a.UserField
	if field == "" {
		field = DefaultAutoKeyUserField
	}
	user := ""
	if len(p.Metadata) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p.Metadata, &m); err == nil && m[field] != nil {
			if err := json.Unmarshal(m[field], &user); err != nil {
				return idemtype.Invalid("metadata."+field, "must be a string (the user of the derived key)")
			}
		}
	}
	tenant, action := p.Tenant, a.Action
	if a.NoTenant {
		tenant = ""
	}
	if action == "" {
		action = p.Kind
	}
	args := p.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	k, err := key.Scoped(tenant, user, action, args)
	if err == nil {
		err = ValidateKey("idempotency_key", k)
	}
	if err != nil {
		return autoKeyError(err, tenant, user, field)
	}
	p.IdempotencyKey = k
	return nil
}

// autoKeyError is the error of a derived key that cannot be made (err),
// naming the part at fault rather than idempotency_key, which the caller
// did not send: the user (metadata.<field>) when it holds a '_' or is not
// a part a key can hold (printable ASCII, short enough), else the tenant
// when it holds a '_' (seed 002's format cannot; AutoKey.NoTenant leaves it
// out). Action and kind were checked at start-up (AutoKey.Validate).
func autoKeyError(err error, tenant, user, field string) error {
	switch {
	case user != "" && (strings.Contains(user, "_") || ValidateKey("user", user) != nil ||
		len(user) > MaxKeyLength-autoKeyFixedLength):
		return idemtype.Invalid("metadata."+field, "cannot derive the idempotency key from the user: %v", err)
	case strings.Contains(tenant, "_"):
		return idemtype.Invalid("tenant", "cannot derive the idempotency key: tenant %q holds '_', which the key's "+
			"format {tenant}_{user}_{action}_{hash} cannot (set no_tenant to leave it out)", tenant)
	case user != "":
		return idemtype.Invalid("metadata."+field, "cannot derive the idempotency key: %v", err)
	}
	return idemtype.Invalid("idempotency_key", "cannot derive the key: %v", err)
}
