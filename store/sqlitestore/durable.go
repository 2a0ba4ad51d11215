package sqlitestore

import (
	"context"
	"sync"
	"sync/atomic"
)

// durability tracks which group commits are durable, for the reads that
// acknowledge a write from what they read (Store.existing answers a
// repeated key with the job the key names). A connection of the read
// pool sees a group as soon as its COMMIT returns, before the WAL fsync
// that makes it durable (synchronous FULL, writer.syncAndAnswer): an
// answer built on such a read must wait for that fsync, or a power loss
// could take away the job the caller was told exists.
//
// Groups are numbered when their COMMIT is issued (begin), so a reader
// that loads the number after its read (issued) covers every group the
// read could have seen; durable is the highest number up to which every
// group is durable (or failed to commit, which leaves nothing to read).
type durability struct {
	issued atomic.Uint64

	mu       sync.Mutex
	durable  uint64
	advanced chan struct{} // closed (and replaced) when durable moves or the writer fails
}

func newDurability() *durability { return &durability{advanced: make(chan struct{})} }

// begin numbers the group whose COMMIT is about to be issued.
func (d *durability) begin() uint64 { return d.issued.Add(1) }

// last is the number of the latest group whose COMMIT was issued.
func (d *durability) last() uint64 { return d.issued.Load() }

// markDurable records that every group up to seq is durable. Calls come in
// commit order (the syncers answer in order), so seq never goes back.
func (d *durability) markDurable(seq uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if seq <= d.durable {
		return
	}
	d.durable = seq
	close(d.advanced)
	d.advanced = make(chan struct{})
}

// wake wakes the waiters without moving durable (the writer failed: they
// return its error).
func (d *durability) wake() {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.advanced)
	d.advanced = make(chan struct{})
}

// wait returns once every group up to seq is durable, or with ctx's error,
// or with failed's (a failed fsync: those groups never will be).
func (d *durability) wait(ctx context.Context, seq uint64, failed func() error) error {
	for {
		d.mu.Lock()
		done, ch := d.durable >= seq, d.advanced
		d.mu.Unlock()
		if done {
			return nil
		}
		if err := failed(); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
