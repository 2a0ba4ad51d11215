package key

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"
	_ "time/tzdata" // the vectors use Asia/Tokyo; do not depend on the host zoneinfo
)

// vectorFile is the layout of testdata/key-vectors.json.
type vectorFile struct {
	Canonical []struct {
		Name      string `json:"name"`
		Input     string `json:"input"`
		Canonical string `json:"canonical"`
		SHA256    string `json:"sha256"`
	} `json:"canonical"`
	Formats []struct {
		Name     string  `json:"name"`
		Prefix   string  `json:"prefix"`
		Tenant   string  `json:"tenant"`
		User     string  `json:"user"`
		Action   string  `json:"action"`
		Function string  `json:"function"`
		Payload  *string `json:"payload"`
		Time     string  `json:"time"`
		Zone     string  `json:"zone"`
		Grain    string  `json:"grain"`
		Entities *string `json:"entities"`
		// EntitiesCanonical is the text the lock key's entity hash hashes.
		EntitiesCanonical string `json:"entities_canonical"`
		Key               string `json:"key"`
	} `json:"formats"`
}

const (
	localVectors  = "testdata/key-vectors.json"
	sharedVectors = "../../shared/testdata/key-vectors.json"
)

func loadVectors(t *testing.T, path string) vectorFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if len(v.Canonical) == 0 || len(v.Formats) == 0 {
		t.Fatalf("%s: no vectors", path)
	}
	return v
}

// TestVectorsCopyMatchesShared fails when the package's copy of the vectors
// drifts from the product's shared file (when that file is present).
func TestVectorsCopyMatchesShared(t *testing.T) {
	t.Parallel()
	shared, err := os.ReadFile(sharedVectors)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not present; testing the local copy only", sharedVectors)
	}
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.ReadFile(localVectors)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shared, local) {
		t.Fatalf("%s differs from %s: copy the shared file into key/testdata", localVectors, sharedVectors)
	}
}

func TestVectors(t *testing.T) {
	t.Parallel()
	paths := []string{localVectors}
	if _, err := os.Stat(sharedVectors); err == nil {
		paths = append(paths, sharedVectors)
	}
	for _, path := range paths {
		v := loadVectors(t, path)
		for _, c := range v.Canonical {
			t.Run(path+"/canonical/"+c.Name, func(t *testing.T) {
				t.Parallel()
				got, err := Canonicalize([]byte(c.Input))
				if err != nil {
					t.Fatalf("Canonicalize: %v", err)
				}
				if string(got) != c.Canonical {
					t.Fatalf("canonical\n got %q\nwant %q", got, c.Canonical)
				}
				h, err := Hash([]byte(c.Input))
				if err != nil {
					t.Fatalf("Hash: %v", err)
				}
				if h != c.SHA256 {
					t.Fatalf("sha256 got %s want %s", h, c.SHA256)
				}
				// The canonical form is a fixed point.
				again, err := Canonicalize(got)
				if err != nil || !bytes.Equal(again, got) {
					t.Fatalf("not a fixed point: %q, %v", again, err)
				}
			})
		}
		for _, f := range v.Formats {
			t.Run(path+"/format/"+f.Name, func(t *testing.T) {
				t.Parallel()
				var (
					got string
					err error
				)
				switch {
				case f.Prefix != "":
					got, err = Prefixed(f.Prefix, []byte(*f.Payload))
				case f.Action != "":
					got, err = Scoped(f.Tenant, f.User, f.Action, []byte(*f.Payload))
				case f.Function != "":
					var (
						tm  time.Time
						loc *time.Location
						g   Grain
					)
					if tm, err = time.Parse(time.RFC3339, f.Time); err != nil {
						t.Fatal(err)
					}
					if loc, err = time.LoadLocation(f.Zone); err != nil {
						t.Fatal(err)
					}
					if g, err = ParseGrain(f.Grain); err != nil {
						t.Fatal(err)
					}
					var ent []byte
					if f.Entities != nil {
						ent = []byte(*f.Entities)
					}
					if f.EntitiesCanonical != "" {
						c, cerr := EntityCanonical(ent, nil)
						if cerr != nil || string(c) != f.EntitiesCanonical {
							t.Fatalf("entities canonical %s, %v; want %s", c, cerr, f.EntitiesCanonical)
						}
					}
					got, err = Lock(f.Function, f.Tenant, tm, loc, g, ent)
				default:
					t.Fatalf("vector %q: unknown format", f.Name)
				}
				if err != nil {
					t.Fatal(err)
				}
				if got != f.Key {
					t.Fatalf("key\n got %s\nwant %s", got, f.Key)
				}
			})
		}
	}
}
