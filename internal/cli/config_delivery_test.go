package cli

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/webhook"
)

// TestConfigDeliveryReachesTheRuntime: every delivery.* key, from the file
// or IDEM_DELIVERY_* (delivery.allow as a comma-separated list), arrives in
// idem.Config.Delivery; the defaults are the library's. `idem serve` used
// to pass no DeliveryConfig, so an operator could not set the sender's
// address policy (deny_private), timeout, caps or user agent.
func TestConfigDeliveryReachesTheRuntime(t *testing.T) {
	t.Parallel()
	set := &idem.DeliveryConfig{TargetRefresh: 7 * time.Second, Webhook: &webhook.Config{
		Timeout: 12 * time.Second, MaxPerTarget: 3, SlotWait: 250 * time.Millisecond, MaxBodyBytes: 4096,
		FollowRedirects: true, DenyPrivate: true, UserAgent: "acme-hooks/2",
		Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/8")}}}
	for _, c := range []struct {
		name, file string
		env        []string
		want       *idem.DeliveryConfig
	}{
		{"defaults", "", nil, &idem.DeliveryConfig{TargetRefresh: idem.DefaultTargetRefresh, Webhook: &webhook.Config{
			Timeout: webhook.DefaultTimeout, MaxPerTarget: webhook.DefaultMaxPerTarget, SlotWait: idem.DefaultDeliverySlotWait,
			MaxBodyBytes: webhook.DefaultMaxBodyBytes, UserAgent: webhook.DefaultUserAgent}}},
		{"file", "[delivery]\ntimeout = \"12s\"\nmax_per_target = 3\nslot_wait = \"250ms\"\nmax_body_bytes = 4096\n" +
			"follow_redirects = true\ndeny_private = true\nallow = [\"10.1.0.0/16\", \"fd00::/8\"]\n" +
			"user_agent = \"acme-hooks/2\"\ntarget_refresh = \"7s\"\n", nil, set},
		{"environment", "", []string{"IDEM_DELIVERY_TIMEOUT=12", "IDEM_DELIVERY_MAX_PER_TARGET=3",
			"IDEM_DELIVERY_SLOT_WAIT=250ms", "IDEM_DELIVERY_MAX_BODY_BYTES=4096", "IDEM_DELIVERY_FOLLOW_REDIRECTS=true",
			"IDEM_DELIVERY_DENY_PRIVATE=true", "IDEM_DELIVERY_ALLOW=10.1.0.0/16, fd00::/8",
			"IDEM_DELIVERY_USER_AGENT=acme-hooks/2", "IDEM_DELIVERY_TARGET_REFRESH=7s"}, set},
		{"slot_wait 0: do not wait", "[delivery]\nslot_wait = 0\n", nil, &idem.DeliveryConfig{
			TargetRefresh: idem.DefaultTargetRefresh, Webhook: &webhook.Config{Timeout: webhook.DefaultTimeout,
				MaxPerTarget: webhook.DefaultMaxPerTarget, SlotWait: -1, MaxBodyBytes: webhook.DefaultMaxBodyBytes,
				UserAgent: webhook.DefaultUserAgent}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadFile(t, c.file, c.env)
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.clientConfig(&idem.Config{}).Delivery
			if got == nil || got.Webhook == nil {
				t.Fatalf("Delivery %+v: want a DeliveryConfig with its Webhook", got)
			}
			if got.TargetRefresh != c.want.TargetRefresh || !reflect.DeepEqual(*got.Webhook, *c.want.Webhook) {
				t.Fatalf("Delivery TargetRefresh %v Webhook %+v,\nwant %v %+v", got.TargetRefresh, *got.Webhook,
					c.want.TargetRefresh, *c.want.Webhook)
			}
			if err := newClientRefuses(t, cfg); err != nil {
				t.Fatalf("idem.NewClient refuses what serve accepted: %v", err)
			}
		})
	}
}

// TestConfigDeliveryRefusals: a delivery value the sender cannot use, or
// would read as its default, is refused at load naming the key (and the
// variable that set it), exit code 2.
func TestConfigDeliveryRefusals(t *testing.T) {
	t.Parallel()
	checkConfigRefusals(t, []configRefusal{
		{"[delivery]\ntimeout = 0\n", "", "delivery.timeout 0s: want a positive duration"},
		{"", "IDEM_DELIVERY_TIMEOUT=-1s", "delivery.timeout (IDEM_DELIVERY_TIMEOUT) -1s: want a positive duration"},
		{"[delivery]\ntarget_refresh = 0\n", "", "delivery.target_refresh 0s: want a positive duration"},
		{"[delivery]\nslot_wait = \"-1s\"\n", "", "delivery.slot_wait -1s is negative: want 0 (do not wait) or more"},
		{"[delivery]\nmax_per_target = 0\n", "", "delivery.max_per_target 0: want 1 or more"},
		{"[delivery]\nmax_body_bytes = -5\n", "", "delivery.max_body_bytes -5: want 1 or more"},
		{"[delivery]\nuser_agent = \"\"\n", "", "delivery.user_agent is empty: want a value"},
		{"[delivery]\nuser_agent = \"a\\nb\"\n", "", "delivery.user_agent \"a\\nb\": want printable text"},
		{"[delivery]\nallow = [\"10.0.0.0/8\", \"10.0.0.1\"]\n", "", "delivery.allow \"10.0.0.1\": want a CIDR prefix"},
		{"", "IDEM_DELIVERY_ALLOW=10.0.0.0/8,nope", "delivery.allow (IDEM_DELIVERY_ALLOW) \"nope\": want a CIDR prefix"},
		{"[delivery]\ndeny_private = \"yes\"\n", "", "delivery.deny_private"},
	})
}
