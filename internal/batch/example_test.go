package batch_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/batch"
)

// A Runner that upper-cases words, one batch at a time: each caller gets
// its own word back.
func Example() {
	r := batch.New(&batch.Config[string]{MaxCount: 100}, func(calls []*batch.Call[string, string]) {
		// One "transaction" for the whole batch, then one answer per call.
		for _, c := range calls {
			c.Answer(strings.ToUpper(c.Req), nil)
		}
	})
	r.Start()
	defer r.Stop()
	got, err := r.Submit(context.Background(), "idem", 1)
	fmt.Println(got, err)
	// Output: IDEM <nil>
}
