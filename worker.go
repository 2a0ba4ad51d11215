package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// JobArgs is the arguments of a typed job: a JSON-encodable struct that names
// its kind.
type JobArgs interface {
	// Kind is the stable name of the job's type; workers are chosen by it.
	Kind() string
}

// Job is a typed job handed to a Worker: the stored row and its decoded args.
type Job[T JobArgs] struct {
	*JobRow
	Args T
}

// Worker works jobs of one kind. The result (any JSON-encodable value, or
// nil) is stored with the job and, for jobs with an idempotency key, cached
// for later jobs of the key. Return the control errors JobSnooze,
// JobRetryAfter, JobPermanent or JobCancel to steer what happens next; any
// other error fails the attempt and retries with backoff.
type Worker[T JobArgs] interface {
	Work(ctx context.Context, job *Job[T]) (any, error)
}

// WorkFunc adapts a function to a Worker.
type WorkFunc[T JobArgs] func(ctx context.Context, job *Job[T]) (any, error)

// Work implements Worker.
func (f WorkFunc[T]) Work(ctx context.Context, job *Job[T]) (any, error) { return f(ctx, job) }

// HandlerFunc is an untyped handler, as used by servers that do not know the
// args type: it gets the raw row and returns the result as JSON (nil = null).
type HandlerFunc func(ctx context.Context, job *JobRow) (json.RawMessage, error)

// Workers is the registry of handlers by kind. It is safe for concurrent
// use, also while a client started on it claims: registering a handler for
// a new kind after Client.Start wakes the queues of every started client
// that claim for it, so jobs of the kind already waiting are claimed at
// once, not at the next Config.PollInterval.
type Workers struct {
	mu       sync.RWMutex
	handlers map[string]HandlerFunc
	// kinds lists the keys of handlers; replaced, never changed in place,
	// when a kind is added, so a claim may use it after the lock is released.
	kinds []string
	// wakes are told of each new kind, after it is in kinds: the wake-ups
	// of the producers of the started clients (onNewKind), by id.
	wakes  map[int]func()
	wakeID int
	// kindsRead, when set by a test (before Start), is called with each
	// list a claim read, after the read (OnKindsRead).
	kindsRead func(kinds []string)
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{handlers: map[string]HandlerFunc{}} }

// Handle registers an untyped handler for kind, replacing any before it.
// It may be called at any time: a new kind wakes the queues of the started
// clients that claim for it (every queue but those that Deliver), so its
// waiting jobs are claimed at once.
func (w *Workers) Handle(kind string, h HandlerFunc) {
	w.mu.Lock()
	_, known := w.handlers[kind]
	if !known {
		w.kinds = append(slices.Clip(w.kinds), kind) // a new array: readers keep theirs
	}
	w.handlers[kind] = h
	var wakes []func()
	if !known {
		for _, wake := range w.wakes {
			wakes = append(wakes, wake)
		}
	}
	w.mu.Unlock()
	// After the kind is in the list a claim reads: a claim that read the
	// list before it is followed by another (a wake-up is kept until the
	// producer looks for jobs again), so none is lost.
	for _, wake := range wakes {
		wake()
	}
}

// onNewKind calls wake (which must not block) each time a handler of a new
// kind is registered, once the kind is claimed for, until the returned
// function is called.
func (w *Workers) onNewKind(wake func()) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wakes == nil {
		w.wakes = map[int]func(){}
	}
	w.wakeID++
	id := w.wakeID
	w.wakes[id] = wake
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.wakes, id)
	}
}

// claimKinds returns the registered kinds for a claim, read at each claim
// so that a worker registered after Start is claimed for. The slice is
// shared: callers must not change it.
func (w *Workers) claimKinds() []string {
	w.mu.RLock()
	kinds, read := w.kinds, w.kindsRead
	w.mu.RUnlock()
	if read != nil {
		read(kinds)
	}
	return kinds
}

// handler returns the handler of kind, or nil.
func (w *Workers) handler(kind string) HandlerFunc {
	if w == nil {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.handlers[kind]
}

// Kinds lists the registered kinds, in the order they were first registered.
func (w *Workers) Kinds() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return append(make([]string, 0, len(w.kinds)), w.kinds...)
}

// AddWorker registers a typed worker under the kind of its args type.
func AddWorker[T JobArgs](workers *Workers, w Worker[T]) {
	var zero T
	workers.Handle(zero.Kind(), func(ctx context.Context, row *JobRow) (json.RawMessage, error) {
		var args T
		if err := json.Unmarshal(row.Args, &args); err != nil {
			return nil, JobPermanent(fmt.Errorf("decode args of %s: %w", row.Kind, err))
		}
		res, err := w.Work(ctx, &Job[T]{JobRow: row, Args: args})
		if err != nil {
			return nil, err
		}
		return marshalResult(res)
	})
}

// marshalResult encodes a worker's result: a json.RawMessage passes through
// (it must be valid JSON); anything else, a []byte included (a base64
// string, as encoding/json writes it), is encoded with encoding/json.
func marshalResult(v any) (json.RawMessage, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(r) {
			return nil, JobPermanent(fmt.Errorf("result is not valid JSON"))
		}
		return r, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, JobPermanent(fmt.Errorf("encode result: %w", err))
	}
	return b, nil
}
