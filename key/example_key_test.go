package key_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/idem-dev/idem/key"
)

func ExamplePrefixed() {
	payload := []byte(`{"user_id":"u-42","file_name":"site-plan.pdf","file_size":482133,"total_pages":12,` +
		`"project_definitions":[{"name":"North","pages":[1,2,3]},{"name":"South","pages":[4,5]}]}`)
	k, err := key.Prefixed("batch", payload)
	if err != nil {
		panic(err)
	}
	fmt.Println(k)
	// Output: batch_e49028d7b9b54a9e2f393d560db932f60f69c679f6604485fddf59967253a3db
}

func ExampleScoped() {
	k, err := key.Scoped("tenant-abc123", "user-xyz789", "send_email",
		[]byte(`{"to":"a@example.com","template":"welcome"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(k)
	// Output: tenant-abc123_user-xyz789_send_email_b1c2daf60412e169
}

func ExampleLock() {
	at := time.Date(2026, 2, 6, 14, 5, 9, 0, time.UTC)
	withEntities, err := key.Lock("detect-alerts", "tenant-abc123", at, time.UTC, key.GrainDay,
		[]byte(`{"sku":"SKU001","rule_id":"r123"}`))
	if err != nil {
		panic(err)
	}
	hourly, err := key.Lock("cdp-build", "tenant-abc123", at, time.UTC, key.GrainHour, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(withEntities)
	fmt.Println(hourly)
	// Output:
	// detect-alerts:tenant-abc123:2026-02-06:971121298e66
	// cdp-build:tenant-abc123:2026-02-06T14
}

func ExampleHash() {
	// Member order and number spelling do not change the hash.
	a, _ := key.Hash([]byte(`{"b":1,"a":2}`))
	b, _ := key.Hash([]byte(`{ "a": 2.0, "b": 1e0 }`))
	fmt.Println(a)
	fmt.Println(a == b)
	// Output:
	// d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772
	// true
}

func ExampleCanonicalizeWith() {
	c, _ := key.CanonicalizeWith([]byte(`{"tags":["red","blue"],"n":1.50}`),
		&key.Options{Sets: []string{"/tags"}})
	fmt.Println(string(c))
	// Output: {"n":1.5,"tags":["blue","red"]}
}

func ExampleVersioned() {
	k, _ := key.Prefixed("batch", []byte(`{"a":1}`))
	tagged := key.Versioned(k)
	v, rest, _ := key.SplitVersion(tagged)
	fmt.Println(tagged[:12], v, rest == k)
	// Output: v1:batch_015 v1 true
}

func ExampleFit() {
	// A key that fits is kept; a longer one is replaced by its digest.
	fmt.Println(key.Fit("event-e1/billing", 255))
	fmt.Println(key.Fit(strings.Repeat("k", 256), 255))
	// Output:
	// event-e1/billing
	// sha256:ce16fe78208a4e93f7158e62393680e025b2ad584f4e875ce903a654bb74cf93
}

func ExampleDigest() {
	// The bytes as they are: no canonical JSON, so spacing counts.
	fmt.Println(key.Digest("abc"))
	fmt.Println(key.Digest(`{"a":1}`) == key.Digest(`{ "a": 1 }`))
	// Output:
	// ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	// false
}
