package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSystem is River on riverpgxv5.
type riverSystem struct {
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	schema  string
	fast    bool
	handled atomic.Int64
	target  int64
	done    chan<- struct{}
	started bool
}

func newRiver(ctx context.Context, pool *pgxpool.Pool, schema string, o *options, st setup) (*riverSystem, error) {
	s := &riverSystem{pool: pool, schema: schema, fast: st.riverFast}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, fmt.Errorf("river schema: %w", err)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	cfg := &river.Config{Schema: schema, Logger: quietLogger()}
	if st.work {
		workers := river.NewWorkers()
		river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error {
			if s.handled.Add(1) == s.target {
				close(s.done)
			}
			return nil
		}))
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{benchQueue: {MaxWorkers: o.Workers, FetchCooldown: st.cooldown}}
	}
	if s.client, err = river.NewClient(driver, cfg); err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return s, nil
}

func (s *riverSystem) opts(keys bool) *river.InsertOpts {
	o := &river.InsertOpts{Queue: benchQueue}
	if keys {
		o.UniqueOpts = river.UniqueOpts{ByArgs: true}
	}
	return o
}

func (s *riverSystem) insertOne(ctx context.Context, i int, keys bool) error {
	res, err := s.client.Insert(ctx, noopArgs{N: i}, s.opts(keys))
	if err != nil {
		return err
	}
	if res.UniqueSkippedAsDuplicate {
		return fmt.Errorf("job %d: unexpected duplicate", i)
	}
	return nil
}

func (s *riverSystem) insertBatch(ctx context.Context, from, to int, keys bool) error {
	params := make([]river.InsertManyParams, 0, to-from)
	for i := from; i < to; i++ {
		params = append(params, river.InsertManyParams{Args: noopArgs{N: i}, InsertOpts: s.opts(keys)})
	}
	if s.fast {
		n, err := s.client.InsertManyFast(ctx, params)
		if err == nil && n != len(params) {
			err = fmt.Errorf("InsertManyFast inserted %d of %d", n, len(params))
		}
		return err
	}
	res, err := s.client.InsertMany(ctx, params)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.UniqueSkippedAsDuplicate {
			return errors.New("unexpected duplicate")
		}
	}
	return nil
}

func (s *riverSystem) startWork(ctx context.Context, target int64, done chan<- struct{}) error {
	s.target, s.done, s.started = target, done, true
	return s.client.Start(ctx)
}

func (s *riverSystem) completedSQL() string {
	return "SELECT count(*) FROM " + pgx.Identifier{s.schema, "river_job"}.Sanitize() + " WHERE state = 'completed'"
}

func (s *riverSystem) close(ctx context.Context) error {
	var err error
	if s.started {
		err = s.client.Stop(ctx)
	}
	s.pool.Close()
	return err
}
