package cli

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/webhook"
)

// DeliverySettings is the [delivery] section of `idem serve`: the HTTP
// sender shared by every webhook target (webhook.Config) and how often the
// stored targets are re-read (idem.DeliveryConfig). docs/webhooks.md.
type DeliverySettings struct {
	// Timeout bounds one push (a target's own timeout overrides it).
	Timeout Duration `koanf:"timeout" toml:"timeout"`
	// MaxPerTarget caps the concurrent pushes to one scheme://host:port.
	MaxPerTarget int `koanf:"max_per_target" toml:"max_per_target"`
	// SlotWait is how long a push waits for a slot of a saturated target
	// before its job snoozes; 0: do not wait.
	SlotWait Duration `koanf:"slot_wait" toml:"slot_wait"`
	// MaxBodyBytes is how much of a response body is read.
	MaxBodyBytes int64 `koanf:"max_body_bytes" toml:"max_body_bytes"`
	// FollowRedirects follows 307 and 308 within the target's origin.
	FollowRedirects bool `koanf:"follow_redirects" toml:"follow_redirects"`
	// DenyPrivate also refuses loopback, private, CGNAT and unspecified
	// addresses (for a server whose tenants register targets: SSRF).
	DenyPrivate bool `koanf:"deny_private" toml:"deny_private"`
	// Allow lists CIDR prefixes permitted even when the policy refuses them.
	Allow []string `koanf:"allow" toml:"allow"`
	// UserAgent is sent with every push.
	UserAgent string `koanf:"user_agent" toml:"user_agent"`
	// TargetRefresh is how often the stored targets are re-read.
	TargetRefresh Duration `koanf:"target_refresh" toml:"target_refresh"`
}

// deliveryDefaults are the defaults of [delivery], as flat keys: the
// library's (a client's slot wait, idem.DefaultDeliverySlotWait).
func deliveryDefaults() map[string]any {
	return map[string]any{
		"delivery.timeout": webhook.DefaultTimeout.String(), "delivery.max_per_target": webhook.DefaultMaxPerTarget,
		"delivery.slot_wait": idem.DefaultDeliverySlotWait.String(), "delivery.max_body_bytes": webhook.DefaultMaxBodyBytes,
		"delivery.follow_redirects": false, "delivery.deny_private": false, "delivery.allow": []string{},
		"delivery.user_agent": webhook.DefaultUserAgent, "delivery.target_refresh": idem.DefaultTargetRefresh.String(),
	}
}

// validate refuses, naming the key, a value the sender cannot use or
// would read as its default.
func (d DeliverySettings) validate() []error {
	var errs []error
	for _, k := range []struct {
		key string
		v   Duration
	}{{"delivery.timeout", d.Timeout}, {"delivery.target_refresh", d.TargetRefresh}} {
		if k.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want a positive duration", k.key, time.Duration(k.v)))
		}
	}
	if d.SlotWait < 0 {
		errs = append(errs, fmt.Errorf("delivery.slot_wait %s is negative: want 0 (do not wait) or more", time.Duration(d.SlotWait)))
	}
	if d.MaxPerTarget < 1 {
		errs = append(errs, fmt.Errorf("delivery.max_per_target %d: want 1 or more", d.MaxPerTarget))
	}
	if d.MaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("delivery.max_body_bytes %d: want 1 or more", d.MaxBodyBytes))
	}
	if d.UserAgent == "" {
		errs = append(errs, fmt.Errorf("delivery.user_agent is empty: want a value"))
	} else if strings.ContainsFunc(d.UserAgent, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		errs = append(errs, fmt.Errorf("delivery.user_agent %q: want printable text (a header value)", d.UserAgent))
	}
	for _, p := range d.Allow {
		if _, err := netip.ParsePrefix(p); err != nil {
			errs = append(errs, fmt.Errorf("delivery.allow %q: want a CIDR prefix, e.g. 10.0.0.0/8 or 192.0.2.7/32", p))
		}
	}
	return errs
}

// config is the idem.DeliveryConfig of d (validated: every value is the
// one to use; a slot wait of 0 is passed as the sender's "do not wait").
func (d DeliverySettings) config() *idem.DeliveryConfig {
	wc := &webhook.Config{Timeout: time.Duration(d.Timeout), MaxPerTarget: d.MaxPerTarget,
		SlotWait: zeroAsNegative(time.Duration(d.SlotWait)), MaxBodyBytes: d.MaxBodyBytes,
		FollowRedirects: d.FollowRedirects, DenyPrivate: d.DenyPrivate, UserAgent: d.UserAgent}
	for _, s := range d.Allow {
		if p, err := netip.ParsePrefix(s); err == nil {
			wc.Allow = append(wc.Allow, p)
		}
	}
	return &idem.DeliveryConfig{Webhook: wc, TargetRefresh: time.Duration(d.TargetRefresh)}
}
