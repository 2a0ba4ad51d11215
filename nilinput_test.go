package idem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
)

// TestNilInputsAreInvalid: a nil where a call needs a value (no args, no
// function, no job, no replay or event filter) is an error wrapping
// ErrInvalid naming what is missing, never a panic; a nil list parameter
// lists with the defaults.
func TestNilInputsAreInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.client
	ctx := context.Background()
	if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, field string
		call        func() error
	}{
		{"Enqueue(nil args)", "args", func() error { _, err := c.Enqueue(ctx, nil, nil); return err }},
		{"Do(nil fn)", "fn", func() error { _, err := c.Do(ctx, "k", nil, nil); return err }},
		{"FinishedBatch(nil)", "job", func() error { _, err := c.FinishedBatch(ctx, nil); return err }},
		{"JobReplay(nil)", "params", func() error { _, err := c.JobReplay(ctx, nil); return err }},
		{"EventList(nil)", "topic", func() error { _, err := c.EventList(ctx, nil, 0, 10); return err }},
		{"EventReplay(nil)", "topic", func() error { _, err := c.EventReplay(ctx, nil, ""); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.call()
			}()
			if got := invalidField(err); got != tc.field || !errors.Is(err, idem.ErrInvalid) {
				t.Fatalf("error %v (field %q); want one wrapping ErrInvalid naming %q", err, got, tc.field)
			}
		})
	}
	for name, list := range map[string]func(context.Context, *idem.JobListParams) ([]*idem.JobRow, int64, error){
		"JobList": c.JobList, "JobListAll": c.JobListAll,
	} {
		jobs, _, err := list(ctx, nil)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("%s(nil): %d jobs, %v; want the one job", name, len(jobs), err)
		}
	}
}
