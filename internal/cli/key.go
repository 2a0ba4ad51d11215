package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/key"
)

// maxKeyInput is the most `idem key` reads of standard input (16 MiB);
// more is refused.
const maxKeyInput = 16 << 20

// keyFlags are the inputs of `idem key`.
type keyFlags struct {
	prefix, tenant, user, action, function, grain, zone, at string
	sets                                                    []string
}

func newKeyCmd() *cobra.Command {
	var f keyFlags
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Print the idempotency keys of the JSON on standard input",
		Long: `Reads one JSON document on standard input (none reads as null; at most 16 MiB) and prints its canonical form
(RFC 8785), its SHA-256, and each key format whose parts are given:
  prefixed  --prefix P                          P_<sha256>
  scoped    [--tenant T] [--user U] --action A  T_U_A_<hash16> (a missing
                                                tenant or user is empty)
  lock      --function F --tenant T [--grain day --zone UTC --time RFC3339]
                                                F:T:<grain date>:<hash12>`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.unused(cmd); err != nil {
				return err
			}
			// One byte over the limit tells a longer input from one of
			// the limit's size: cut, it could still be JSON, of another key.
			in, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxKeyInput+1))
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			if len(in) > maxKeyInput {
				return usageErr(fmt.Errorf("standard input is over 16 MiB (%d bytes): idem key reads one JSON document of at most that", maxKeyInput))
			}
			return printKeys(cmd.OutOrStdout(), in, &f, wantJSON(cmd))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.prefix, "prefix", "", "prefix of the prefixed key")
	fl.StringVar(&f.tenant, "tenant", "", "tenant of the scoped and lock keys")
	fl.StringVar(&f.user, "user", "", "user of the scoped key")
	fl.StringVar(&f.action, "action", "", "action of the scoped key")
	fl.StringVar(&f.function, "function", "", "function of the lock key")
	fl.StringVar(&f.grain, "grain", "day", "time grain of the lock key: minute, hour or day")
	fl.StringVar(&f.zone, "zone", "UTC", "time zone of the lock key's grain")
	fl.StringVar(&f.at, "time", "", "time of the lock key (RFC 3339; default now)")
	// StringArray, not StringSlice: a pointer is taken whole (a member name
	// may hold a comma or a quote, which a comma-separated flag would split).
	fl.StringArrayVar(&f.sets, "set", nil, "JSON pointer of an array to sort as a set (repeatable, one pointer each)")
	return cmd
}

// unused refuses a part of a key format given without the flag that
// selects the format (--grain without --function, --user without
// --action): no key used it, and it was dropped without a word.
func (f *keyFlags) unused(cmd *cobra.Command) error {
	for _, p := range []struct {
		flag, needs, format string
		given               bool
	}{
		{"grain", "--function", "lock", f.function != ""}, {"zone", "--function", "lock", f.function != ""},
		{"time", "--function", "lock", f.function != ""}, {"user", "--action", "scoped", f.action != ""},
		{"tenant", "--action or --function", "scoped and lock", f.action != "" || f.function != ""},
	} {
		if !p.given && cmd.Flags().Changed(p.flag) {
			return usageErr(fmt.Errorf("--%s is a part of the %s key: give %s too", p.flag, p.format, p.needs))
		}
	}
	return nil
}

// keyResult is what `idem key` prints; --json prints it as is.
type keyResult struct {
	Version   string `json:"version"`
	Canonical string `json:"canonical"`
	SHA256    string `json:"sha256"`
	Prefixed  string `json:"prefixed,omitempty"`
	Scoped    string `json:"scoped,omitempty"`
	Lock      string `json:"lock,omitempty"`
}

func computeKeys(in []byte, f *keyFlags) (*keyResult, error) {
	opts := &key.Options{Sets: f.sets}
	if strings.Trim(string(in), key.JSONSpace) == "" {
		// No input is JSON null: a lock key without entities (seed 004's
		// "cdp-build:tenant:2026-02-06") needs nothing on standard input.
		// Only JSON's whitespace counts, as in key.Lock: "\v" is not JSON.
		in = []byte("null")
	}
	canon, err := key.CanonicalizeWith(in, opts)
	if err != nil {
		return nil, usageErr(err)
	}
	hash, err := key.HashWith(in, opts)
	if err != nil {
		return nil, usageErr(err)
	}
	r := &keyResult{Version: key.Version, Canonical: string(canon), SHA256: hash}
	if f.prefix != "" {
		if r.Prefixed, err = key.PrefixedWith(f.prefix, in, opts); err != nil {
			return nil, usageErr(err)
		}
	}
	// Seed 002's tenant and user may be null: an absent --tenant or
	// --user is an empty component ("_user-1_send_email_…"), as in
	// key.Scoped.
	if f.action != "" {
		if r.Scoped, err = key.ScopedWith(f.tenant, f.user, f.action, in, opts); err != nil {
			return nil, usageErr(err)
		}
	}
	if f.function != "" {
		if r.Lock, err = lockKey(in, f, opts); err != nil {
			return nil, usageErr(err)
		}
	}
	return r, nil
}

func printKeys(w io.Writer, in []byte, f *keyFlags, asJSON bool) error {
	r, err := computeKeys(in, f)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "version    %s\ncanonical  %s\nsha256     %s\n", r.Version, r.Canonical, r.SHA256)
	for _, l := range []struct{ name, v string }{{"prefixed", r.Prefixed}, {"scoped", r.Scoped}, {"lock", r.Lock}} {
		if l.v != "" {
			fmt.Fprintf(w, "%-10s %s\n", l.name, l.v)
		}
	}
	return nil
}

func lockKey(in []byte, f *keyFlags, opts *key.Options) (string, error) {
	if f.tenant == "" {
		return "", errors.New("lock key needs --tenant")
	}
	g, err := key.ParseGrain(f.grain)
	if err != nil {
		return "", err
	}
	loc, err := time.LoadLocation(f.zone)
	if err != nil {
		return "", fmt.Errorf("zone %q: %w", f.zone, err)
	}
	at := time.Now()
	if f.at != "" {
		if at, err = time.Parse(time.RFC3339, f.at); err != nil {
			return "", fmt.Errorf("--time: %w", err)
		}
	}
	var entities []byte
	if s := strings.Trim(string(in), key.JSONSpace); s != "" && s != "null" {
		entities = in
	}
	return key.LockWith(f.function, f.tenant, at, loc, g, entities, opts)
}
