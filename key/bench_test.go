package key

import (
	"fmt"
	"strings"
	"testing"
)

var smallPayload = []byte(`{"user_id":"u-42","file_name":"site-plan.pdf","file_size":482133,"total_pages":12,` +
	`"project_definitions":[{"name":"North","pages":[1,2,3]},{"name":"South","pages":[4,5]}]}`)

// largePayload is about 4 KB of typical job arguments.
var largePayload = func() []byte {
	var b strings.Builder
	b.WriteString(`{"tenant":"tenant-abc123","items":[`)
	for i := 0; b.Len() < 4000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU%05d","qty":%d,"price":%d.%02d,"tags":["b","a"],"note":"caf\u00e9 \"x\""}`, i, i%7, i*3, i%100)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}()

// benchPayloads runs f on the small and on the 4 KB payload, as
// sub-benchmarks that report the bytes and allocations per call.
func benchPayloads(b *testing.B, f func(data []byte) error) {
	for _, c := range []struct {
		name string
		data []byte
	}{{"small", smallPayload}, {"4KB", largePayload}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := f(c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	benchPayloads(b, func(data []byte) error { _, err := Canonicalize(data); return err })
}

func BenchmarkCanonicalizeWithSets(b *testing.B) {
	o := &Options{Sets: []string{"/items", "/items/*/tags"}}
	b.SetBytes(int64(len(largePayload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CanonicalizeWith(largePayload, o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	benchPayloads(b, func(data []byte) error { _, err := Hash(data); return err })
}
