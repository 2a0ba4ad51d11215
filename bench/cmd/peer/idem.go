package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
)

// benchQueue is the one queue both systems use.
const benchQueue = "bench"

// noopArgs are the args of the no-op job of both systems: {"n": i}.
type noopArgs struct {
	N int `json:"n"`
}

// Kind implements idem.JobArgs and river.JobArgs.
func (noopArgs) Kind() string { return "noop" }

// idemSystem is idem on pgstore.
type idemSystem struct {
	pool    *pgxpool.Pool
	st      *pgstore.Store
	client  *idem.Client
	schema  string
	handled atomic.Int64
	target  int64
	done    chan<- struct{}
	started bool
}

func newIdem(ctx context.Context, pool *pgxpool.Pool, schema string, o *options, st setup) (*idemSystem, error) {
	s := &idemSystem{pool: pool, schema: schema}
	store, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("idem store: %w", err)
	}
	s.st = store
	cfg := &idem.Config{Logger: quietLogger()}
	if st.work {
		workers := idem.NewWorkers()
		workers.Handle(noopArgs{}.Kind(), func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			if s.handled.Add(1) == s.target {
				close(s.done)
			}
			return nil, nil
		})
		cfg.Workers = workers
		cfg.Queues = map[string]idem.QueueConfig{benchQueue: {MaxWorkers: o.Workers}}
	}
	if s.client, err = idem.NewClient(store, cfg); err != nil {
		store.Close()
		return nil, fmt.Errorf("idem client: %w", err)
	}
	return s, nil
}

func (s *idemSystem) opts(i int, keys bool) *idem.EnqueueOpts {
	o := &idem.EnqueueOpts{Queue: benchQueue}
	if keys {
		o.IdempotencyKey = "k" + strconv.Itoa(i)
	}
	return o
}

func (s *idemSystem) insertOne(ctx context.Context, i int, keys bool) error {
	res, err := s.client.Enqueue(ctx, noopArgs{N: i}, s.opts(i, keys))
	if err != nil {
		return err
	}
	if res.Existing {
		return fmt.Errorf("job %d: unexpected existing job", i)
	}
	return nil
}

func (s *idemSystem) insertBatch(ctx context.Context, from, to int, keys bool) error {
	items := make([]idem.EnqueueParams, 0, to-from)
	for i := from; i < to; i++ {
		b, err := json.Marshal(noopArgs{N: i})
		if err != nil {
			return err
		}
		items = append(items, idem.EnqueueParams{Kind: noopArgs{}.Kind(), Args: b, Opts: s.opts(i, keys)})
	}
	res, err := s.client.EnqueueMany(ctx, items)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func (s *idemSystem) startWork(ctx context.Context, target int64, done chan<- struct{}) error {
	s.target, s.done, s.started = target, done, true
	return s.client.Start(ctx)
}

func (s *idemSystem) completedSQL() string {
	return "SELECT count(*) FROM " + pgx.Identifier{s.schema, "jobs"}.Sanitize() + " WHERE state = 'completed'"
}

func (s *idemSystem) close(ctx context.Context) error {
	var err error
	if s.started {
		err = s.client.Stop(ctx)
	}
	err = errors.Join(err, s.st.Close())
	s.pool.Close()
	return err
}
