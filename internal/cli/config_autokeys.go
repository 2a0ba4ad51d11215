package cli

import (
	"errors"
	"fmt"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

// AutoKeyConfig is one [auto_key_by_queue.NAME] or [auto_key_by_kind.NAME]
// entry of `idem serve` (file only, like the other maps): every job of
// that queue or kind enqueued without an idempotency key gets the key
// {tenant}_{user}_{action}_{hash16} of seed 002 (idem.AutoKey; the kind's
// entry wins over the queue's).
type AutoKeyConfig struct {
	// Action is the key's action part; "" (not written) = the job's kind.
	Action string `koanf:"action" toml:"action,omitempty"`
	// UserField is the metadata field holding the user; not written =
	// idem.DefaultAutoKeyUserField ("user"). A pointer, so that a
	// user_field written empty is refused rather than read as the default.
	UserField *string `koanf:"user_field" toml:"user_field,omitempty"`
	// NoTenant leaves the tenant part empty (seed 002's null tenant).
	NoTenant bool `koanf:"no_tenant" toml:"no_tenant,omitempty"`
}

// autoKey is the idem.AutoKey of a.
func (a AutoKeyConfig) autoKey() idem.AutoKey {
	k := idem.AutoKey{Action: a.Action, NoTenant: a.NoTenant}
	if a.UserField != nil {
		k.UserField = *a.UserField
	}
	return k
}

// validate checks the entry of section ("auto_key_by_queue") for the
// queue or kind name (what), naming the key of any bad value: the name as
// idem takes queue and kind names, the action as idem.AutoKey.Validate
// (the rules of key.Scoped, and keys the stores take), a user_field
// written non-empty.
func (a AutoKeyConfig) validate(section, what, name string) []error {
	prefix := section + "." + name
	var errs []error
	if err := idem.ValidateName(what, name); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", prefix, err))
	}
	if err := a.autoKey().Validate(); err != nil {
		var inv *idemtype.InvalidError
		if errors.As(err, &inv) {
			err = fmt.Errorf("%s.%s: %s", prefix, inv.Field, inv.Reason)
		}
		errs = append(errs, err)
	}
	if a.UserField != nil && *a.UserField == "" {
		errs = append(errs, fmt.Errorf("%s.user_field is empty: want the metadata field of the user (not written = %q)",
			prefix, idem.DefaultAutoKeyUserField))
	}
	return errs
}

// validateAutoKeys checks [auto_key_by_queue] and [auto_key_by_kind].
func (c *ServeConfig) validateAutoKeys() []error {
	var errs []error
	for _, q := range sortedKeys(c.AutoKeyByQueue) {
		errs = append(errs, c.AutoKeyByQueue[q].validate("auto_key_by_queue", "queue", q)...)
	}
	for _, k := range sortedKeys(c.AutoKeyByKind) {
		errs = append(errs, c.AutoKeyByKind[k].validate("auto_key_by_kind", "kind", k)...)
	}
	return errs
}

// autoKeys is the idem.Config.AutoKeyByQueue or AutoKeyByKind of in: nil
// (idem's "none") when in is empty.
func autoKeys(in map[string]AutoKeyConfig) map[string]idem.AutoKey {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]idem.AutoKey, len(in))
	for name, a := range in {
		out[name] = a.autoKey()
	}
	return out
}
