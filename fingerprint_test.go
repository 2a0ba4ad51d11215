package idem

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestFingerprintPinned pins fingerprints computed by the release before
// fingerprint wrote the document itself (79f9dd6): stored
// records compare fingerprints across versions, so a change here makes
// every retried request of an upgrade look like a reused key.
func TestFingerprintPinned(t *testing.T) {
	at := time.Date(2026, 11, 26, 15, 4, 5, 123456789, time.FixedZone("x", 3600))
	for _, c := range []struct {
		p     store.JobInsertParams
		runAt time.Time
		want  string
	}{
		{store.JobInsertParams{Queue: "default", Kind: "email", Args: json.RawMessage(`{"to":"a@b.c","n":1}`), MaxAttempts: 25},
			time.Time{}, "9e2f356c78e2c1a5135a1b47347213d927830a99714a0d2e8f38509d859bc78d"},
		{store.JobInsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{"b":[1,2.50,1e21],"a":"\u00e9<>"}`), Priority: -3,
			MaxAttempts: 5, PartitionKey: "p:1", DependsOn: []int64{7, 1 << 60}, DependsOnFinished: true,
			Metadata: json.RawMessage(` {"z":null,"y":true} `)}, at,
			"5e0034d18d89c1bd60a8ecfde70560bc958bdd8edb3ee2fc31b37b0bb4b174b0"},
	} {
		got, err := fingerprint(&c.p, c.runAt)
		if err != nil {
			t.Fatal(err)
		}
		def, err := fingerprintOf(&c.p, c.runAt)
		if err != nil {
			t.Fatal(err)
		}
		if got != def || got != c.want {
			t.Errorf("fingerprint %s, by definition %s, pinned %s", got, def, c.want)
		}
	}
}

// TestFingerprintEmptyMetadata: metadata absent, null or an empty object
// (however spaced) is "no metadata", with the pinned fingerprint of a job
// without metadata, by both computations; a non-empty object differs.
func TestFingerprintEmptyMetadata(t *testing.T) {
	const pinned = "9e2f356c78e2c1a5135a1b47347213d927830a99714a0d2e8f38509d859bc78d"
	for _, m := range []string{"", "null", "{}", " { \n\t} ", "{\r\n}", `{"a":1}`, `{"":null}`} {
		p := store.JobInsertParams{Queue: "default", Kind: "email", Args: json.RawMessage(`{"to":"a@b.c","n":1}`), MaxAttempts: 25}
		if m != "" {
			p.Metadata = json.RawMessage(m)
		}
		got, err := fingerprint(&p, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		def, err := fingerprintOf(&p, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if empty := !strings.Contains(m, `"`); got != def || (got == pinned) != empty {
			t.Errorf("metadata %q: fingerprint %s, by definition %s, pinned without metadata %s", m, got, def, pinned)
		}
	}
}

// TestFingerprintMatchesDefinition compares fingerprint with fingerprintOf
// on random jobs: strings with escapes, controls, non-ASCII and invalid
// UTF-8, numbers in every canonical form, dependencies beyond 2^53, run_at
// in other zones, metadata absent, null or an object, and invalid args.
func TestFingerprintMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "a", "default", "é", "日本", "\x00\x1f", "q\"\\/", "<&>", "\u2028", "\xff", "a\xc3", "😀", "\t\n\r\b\f"}
	nums := []string{"0", "-0", "1", "-1", "2.50", "1e21", "1e-7", "123456789012345678901234", "0.1", "1E+2", "9007199254740993"}
	rs := func() string { return strs[rng.IntN(len(strs))] }
	var jsonVal func(depth int) string
	jsonVal = func(depth int) string {
		switch k := rng.IntN(7); {
		case k == 0 && depth < 3:
			var parts []string
			for i := range rng.IntN(4) {
				parts = append(parts, fmt.Sprintf("%q: %s", fmt.Sprint(rs(), i), jsonVal(depth+1)))
			}
			return "{" + strings.Join(parts, ",") + "}"
		case k == 1 && depth < 3:
			var parts []string
			for range rng.IntN(4) {
				parts = append(parts, jsonVal(depth+1))
			}
			return " [" + strings.Join(parts, " , ") + "]"
		case k == 2:
			return nums[rng.IntN(len(nums))]
		case k == 3:
			return []string{"true", "false", "null"}[rng.IntN(3)]
		default:
			b, _ := json.Marshal(rs())
			return string(b)
		}
	}
	same, invalid := 0, 0
	for i := range 20000 {
		p := store.JobInsertParams{
			Queue: rs(), Kind: rs(), PartitionKey: rs(),
			Args:     json.RawMessage(`{"x":` + jsonVal(0) + `}`),
			Priority: rng.IntN(2001) - 1000, MaxAttempts: rng.IntN(1000),
		}
		switch rng.IntN(6) {
		case 0:
			p.Args = nil
		case 1:
			p.Args = json.RawMessage(`{"a":1,"a":2}`) // duplicate member: invalid
		case 2:
			p.Args = json.RawMessage(`{"a":"` + rs() + `"}`) // raw, possibly invalid UTF-8 or controls
		}
		switch rng.IntN(3) {
		case 1:
			p.Metadata = json.RawMessage("null")
		case 2:
			p.Metadata = json.RawMessage(jsonVal(1))
		}
		for range rng.IntN(3) {
			p.DependsOn = append(p.DependsOn, rng.Int64()>>rng.IntN(63))
		}
		p.DependsOnFinished = rng.IntN(2) == 0
		var runAt time.Time
		if rng.IntN(2) == 0 {
			runAt = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("z", (rng.IntN(48)-24)*1800))
		}
		got, gotErr := fingerprint(&p, runAt)
		want, wantErr := fingerprintOf(&p, runAt)
		if (gotErr != nil) != (wantErr != nil) || got != want {
			t.Fatalf("job %d %+v run_at %v: fingerprint %q (%v), by definition %q (%v)", i, p, runAt, got, gotErr, want, wantErr)
		}
		if gotErr != nil {
			if !errors.Is(gotErr, idemtype.ErrInvalid) {
				t.Fatalf("job %d: error %v is not ErrInvalid", i, gotErr)
			}
			invalid++
		} else {
			same++
		}
	}
	if same < 10000 || invalid < 1000 {
		t.Fatalf("%d equal fingerprints and %d invalid inputs: the generator does not cover both", same, invalid)
	}
}

// FuzzFingerprint holds fingerprint equal to its definition on any args,
// metadata and strings.
func FuzzFingerprint(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(``), "default", "k", "", int64(3))
	f.Add([]byte(`{"b":"\u00e9","a":[1e21,-0]}`), []byte(`{"m":null}`), "q\xff", "é", "p\x00", int64(1)<<60)
	f.Fuzz(func(t *testing.T, args, meta []byte, queue, kind, part string, dep int64) {
		p := store.JobInsertParams{Queue: queue, Kind: kind, PartitionKey: part, Args: args, Metadata: meta,
			MaxAttempts: 3, Priority: int(dep % 100)}
		if dep%2 == 0 {
			p.DependsOn = []int64{dep}
		}
		got, gotErr := fingerprint(&p, time.Time{})
		want, wantErr := fingerprintOf(&p, time.Time{})
		if (gotErr != nil) != (wantErr != nil) || got != want {
			t.Fatalf("fingerprint %q (%v), by definition %q (%v)", got, gotErr, want, wantErr)
		}
	})
}

// BenchmarkFingerprint is the fingerprint of a small keyed job, written
// directly and by its definition.
func BenchmarkFingerprint(b *testing.B) {
	p := store.JobInsertParams{Queue: "default", Kind: "noop", Args: json.RawMessage(`{"n":12345}`), MaxAttempts: 25}
	for _, c := range []struct {
		name string
		fn   func(*store.JobInsertParams, time.Time) (string, error)
	}{{"direct", fingerprint}, {"definition", fingerprintOf}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(&p, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
