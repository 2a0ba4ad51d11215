// Package pgstore is the PostgreSQL backend of idem (pgx v5, pgxpool).
//
// Many processes share one database: claims use FOR UPDATE SKIP LOCKED,
// idempotency keys are decided by the unique constraint of the records
// table (INSERT … ON CONFLICT), wake-ups use LISTEN/NOTIFY on a channel
// named after the schema, and leader election uses a row with an expiry.
// Every table lives in one schema (Config.Schema, default "idem") so idem can
// sit beside an application's own tables. See docs/postgres.md.
package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/store"
)

// Defaults of Config.
const (
	// DefaultSchema is the schema that holds idem's tables.
	DefaultSchema = "idem"
	// DefaultListenReconnectDelay is the first wait before Listen reconnects
	// after its connection failed; it doubles up to 30 s.
	DefaultListenReconnectDelay = 250 * time.Millisecond
)

// Config configures a Store. A nil *Config means every default.
type Config struct {
	// Schema is the PostgreSQL schema of idem's tables; DefaultSchema when
	// empty. It must be a plain lower-case identifier ([a-z_][a-z0-9_]*).
	// The LISTEN/NOTIFY channel has the same name.
	Schema string
	// SkipMigrate: New does not run Migrate (run `idem migrate up` instead).
	SkipMigrate bool
	// ListenReconnectDelay is the first wait before Listen reconnects;
	// DefaultListenReconnectDelay when 0.
	ListenReconnectDelay time.Duration
	// Logger receives the few events of background loops (Listen
	// reconnects); slog.Default() when nil.
	Logger *slog.Logger
	// GroupCommitWorkers is how many shared transactions of each kind
	// (insert, finish) may be in flight at once when JobInsertMany and
	// JobFinishMany combine concurrent small requests (group commit, see
	// docs/postgres.md); 2 when 0; a negative value turns group commit off
	// (each call is its own transaction).
	GroupCommitWorkers int
	// VacuumEvery is how many jobs this Store claims between two VACUUMs of
	// the jobs table that it runs itself, in the background, so that claims
	// do not slow down with the dead entries of the claim index whether or
	// not autovacuum keeps up (see docs/postgres.md, "Dead rows");
	// DefaultVacuumEvery when 0; a negative value turns it off. The VACUUM
	// needs the role to own the table; without ownership PostgreSQL skips it
	// with a warning.
	VacuumEvery int
	// CallerClock makes the caller's Now decide whether a job lease or a
	// leader term expired, as on SQLite. By default (false) the database's
	// clock decides and heartbeats and leader terms end at the database's
	// now() plus their length, so a node whose clock runs ahead can neither
	// rescue live leases nor take over a live leader (docs/postgres.md,
	// "Clocks"). Set it only for tests that drive time with a fake clock.
	CallerClock bool
}

var _ store.Store = (*Store)(nil)

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Store is a store.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string
	sqlr     *strings.Replacer
	// sqlDone holds statements with the schema filled in (sql), at most
	// maxSQLDone of them; sqlCount counts them.
	sqlDone   sync.Map
	sqlCount  atomic.Int32
	logger    *slog.Logger
	reconnect time.Duration
	closed    atomic.Bool
	// callerClock: the caller's Now decides expiry (Config.CallerClock).
	callerClock bool
	groups      *groups   // nil when group commit is off
	copyBufs    copyBufs  // buffers of COPY streams, reused
	vac         *vacuumer // nil when VacuumEvery < 0
	// cursors rotate fair claims among tenants (see JobClaim).
	cursors store.ClaimCursors
	// flowHints: queues whose last claim found flow-control rows.
	flowHints flowHints
	// shapes: per set of queues, what the last limited claim found (see
	// claimLimited).
	shapes flowShapes
	// excluded: per queue, the tenants its last claim found spent.
	excluded excludedHints
	// solo: per queue, the one tenant the last claim (of all tenants, on
	// any path) visited ("" = none or several); see qClaimOne and
	// rotationStart.
	solo store.ClaimCursors
	// skips: per set of queues, limited claims that skip the
	// one-round-trip claim after it declined (see claimLimitedFirst).
	skips fastSkips
	// oneRoundTaken and oneRoundDeclined count the limited claims the
	// one-round-trip claim took and declined; oneRoundMode is a test's
	// choice of path (see claimLimitedFirst).
	oneRoundTaken, oneRoundDeclined atomic.Int64
	// reserved is the rate budget the store holds (claim_reserved.go);
	// reservedTaken counts the claims that spent it (reservedInherited
	// those of queues with default limits, reservedPaused those of paused
	// queues or queues with paused tenants, reservedWeighted those of
	// queues with weighted tenants, reservedConc those of queues under
	// tenants' concurrency limits, reservedConcBound those of them that
	// the bound let through without reading the limits, reservedConcSkipped
	// those that skipped tenants at a concurrency limit); noReserve is a
	// test's choice to claim without it.
	reserved                                                           reservations
	reservedTaken, reservedInherited, reservedPaused, reservedWeighted atomic.Int64
	reservedConc, reservedConcBound, reservedConcSkipped               atomic.Int64
	noReserve                                                          bool
	oneRoundMode                                                       oneRoundMode
	// holder names the store in flow_known (claim_reserved_budget.go);
	// knownWritten says whether it may have rows there for Close to delete
	// (a store that never claimed, such as `idem migrate status`'s on a
	// schema with no tables, has none).
	holder       string
	knownWritten atomic.Bool
	// acquireFullOnly: a test's or benchmark's choice to acquire keys with
	// the full statement only, without reading the jobs' own keys first
	// (see acquireSet).
	acquireFullOnly bool
	// keyedCopied counts the keyed batches insertKeyedCopy inserted by
	// COPY, keyedCopyRetried those it sent to the general path after a
	// key existed.
	keyedCopied, keyedCopyRetried atomic.Int64
}

// New returns a Store on pool and, unless cfg.SkipMigrate, migrates the
// schema to the newest version. The pool stays the caller's: Close does not
// close it.
//
// The pool's connections must run READ COMMITTED transactions (the server's
// default): the store's claims, key decisions and locks rely on each
// statement seeing the rows committed before it, and on row locks
// re-checking a row that changed (docs/postgres.md). A database or role
// whose default_transaction_isolation is stricter makes them fail under
// concurrency with serialization errors; New refuses such a pool
// (ErrIsolation): build it from PoolConfig, as Open does. New reads the
// setting on one of the pool's connections, so it needs the database even
// with SkipMigrate.
func New(ctx context.Context, pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	var iso string
	if err := pool.QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&iso); err != nil {
		return nil, fmt.Errorf("pgstore: read the pool's transaction isolation: %w", err)
	}
	if iso != "read committed" && iso != "read uncommitted" { // PostgreSQL runs the latter as the former
		return nil, fmt.Errorf("%w: the pool's connections run %q transactions", ErrIsolation, iso)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if !schemaRE.MatchString(c.Schema) {
		return nil, fmt.Errorf("pgstore: invalid schema name %q (want [a-z_][a-z0-9_]*)", c.Schema)
	}
	if c.ListenReconnectDelay <= 0 {
		c.ListenReconnectDelay = DefaultListenReconnectDelay
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	s := &Store{
		pool:      pool,
		schema:    c.Schema,
		sqlr:      strings.NewReplacer("{schema}", `"`+c.Schema+`"`, "{db_now}", dbNow(c.CallerClock)),
		logger:    c.Logger,
		reconnect: c.ListenReconnectDelay,

		callerClock: c.CallerClock,
		holder:      rand.Text(),
	}
	if !c.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
		// Rows of stores that did not close (crashed) are forgotten after
		// a day; a live store whose rows went writes them again when a
		// claim declines for them.
		if _, err := pool.Exec(ctx, s.sql(qKnownStale)); err != nil {
			s.logger.Warn("pgstore: forget stale known tenants", "err", err)
		}
	}
	switch {
	case c.GroupCommitWorkers == 0:
		s.startGroups(defaultGroupWorkers)
	case c.GroupCommitWorkers > 0:
		s.startGroups(c.GroupCommitWorkers)
	}
	switch {
	case c.VacuumEvery == 0:
		s.startVacuumer(DefaultVacuumEvery)
	case c.VacuumEvery > 0:
		s.startVacuumer(c.VacuumEvery)
	}
	return s, nil
}

// ErrIsolation is New's error for a pool whose connections do not run
// READ COMMITTED transactions by default.
var ErrIsolation = errors.New("pgstore: idem needs READ COMMITTED transactions (start the pool from PoolConfig, which sets default_transaction_isolation=read committed, or use Open)")

// DefaultMaxConns is the size of the pool Open creates when the URL does not
// set pool_max_conns: claims, group commits, heartbeats, LISTEN and the
// HTTP server's reads all need connections at once, more than pgx's default
// of max(4, CPUs).
const DefaultMaxConns = 32

// PoolConfig is the pool configuration Open uses for url: DefaultMaxConns
// connections unless the URL sets pool_max_conns, and READ COMMITTED
// transactions whatever the database's or role's default (see New). A
// caller that builds its own pool for New (to add a tracer, say) starts
// from it. A URL whose password holds an unescaped '@' is refused (write
// it as %40), and errors never quote the password.
func PoolConfig(url string) (*pgxpool.Config, error) {
	if err := checkUserinfo(url); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, hidePassword(err, url)
	}
	if !strings.Contains(url, "pool_max_conns") {
		pcfg.MaxConns = DefaultMaxConns
	}
	// A session setting made on each new connection: it takes precedence
	// over ALTER DATABASE and ALTER ROLE settings. (Not a startup
	// parameter: PgBouncer refuses the ones it does not know.)
	pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SET default_transaction_isolation = 'read committed'")
		return err
	}
	return pcfg, nil
}

// Open connects to the database at url (a PostgreSQL URL or DSN) with a new
// pool that the Store owns and closes in Close. Its errors never quote the
// URL's password, nor any piece of it: a URL whose password holds an
// unescaped '@' is refused before connecting (write it as %40).
func Open(ctx context.Context, url string, cfg *Config) (*Store, error) {
	s, err := open(ctx, url, cfg)
	return s, hidePassword(err, url)
}

// open is Open before its error is masked.
func open(ctx context.Context, url string, cfg *Config) (*Store, error) {
	pcfg, err := PoolConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// Pool returns the pool the Store uses (for EnqueueTx-style callers that
// need to begin their own transactions on the same database).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the schema of idem's tables.
func (s *Store) Schema() string { return s.schema }

// Close makes every later call fail, stops the group-commit workers (after
// their current transaction) and the vacuumer (cancelling its VACUUM), and
// closes the pool when Open made it.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stopGroups()
	s.stopVacuumer()
	// Give back the rate budget reserved and not spent, so that other
	// processes can start it in this window.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := s.unreserve(ctx, s.pool); err != nil {
		s.logger.Warn("pgstore: give back reserved rate budget", "err", err)
	}
	if s.knownWritten.Load() {
		if _, err := s.pool.Exec(ctx, s.sql(qKnownClose), s.holder); err != nil {
			s.logger.Warn("pgstore: forget known tenants", "err", err)
		}
	}
	cancel()
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// maxSQLDone bounds Store.sqlDone: the statements are constants and a
// few built variants, so it is never reached unless a caller builds
// statements without bound; those are filled in each time.
const maxSQLDone = 1024

// sql returns query q with the schema filled in. Each statement is filled
// in once: the claim statements are several kilobytes, and replacing the
// schema in them on every claim took 20–35 µs of a claim's CPU.
func (s *Store) sql(q string) string {
	if v, ok := s.sqlDone.Load(q); ok {
		return v.(string)
	}
	out := s.sqlr.Replace(q)
	if s.sqlCount.Load() < maxSQLDone {
		s.sqlCount.Add(1)
		s.sqlDone.Store(q, out)
	}
	return out
}

// querier is what a pool and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// db returns the pool, or store.ErrClosed after Close.
func (s *Store) db() (querier, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	return s.pool, nil
}

// conn takes a pooled connection for statements of its own (a transaction
// begun inside a pipeline), or store.ErrClosed after Close. Release it when
// done: a connection left inside a transaction (an error, a cancelled
// context) is destroyed by Release rather than reused.
func (s *Store) conn(ctx context.Context) (*pgxpool.Conn, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	return s.pool.Acquire(ctx)
}

// tx runs fn in a READ COMMITTED transaction and commits it when fn
// returns nil.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// utc returns t in UTC.
// expiryClock is the clock argument of the queries that decide whether a
// lease or a leader term expired: now under Config.CallerClock, nil (SQL
// NULL, so the query uses the database's now()) otherwise.
func (s *Store) expiryClock(now time.Time) *time.Time {
	if !s.callerClock {
		return nil
	}
	return &now
}

// leaseShift is the SQL interval added to a lease end the caller computed
// as its now (the SQL parameter now) plus the lease's length: how far the
// expiry clock ({db_now}) is ahead of the caller's clock, 0 when it is not
// (or under Config.CallerClock). A caller whose clock runs behind the
// database's would otherwise store a lease that, by the clock that decides
// expiry, ends early (or has ended): the rescuer or another acquirer would
// take it over while it is used. One whose clock runs ahead keeps its later
// end.
func leaseShift(now string) string {
	return `(greatest(` + now + `::timestamptz, {db_now}) - ` + now + `::timestamptz)`
}

// dbNow is what {db_now} stands for in the store's SQL: the database's
// clock, which decides lease expiry (see expiryClock), or, when the
// caller's clock decides (Config.CallerClock), a time before any other, so
// that greatest(<the statement's now>, {db_now}) is the caller's now.
func dbNow(callerClock bool) string {
	if callerClock {
		return `'-infinity'::timestamptz`
	}
	return `now()`
}

func utc(t time.Time) time.Time { return t.UTC() }

// utcP returns *t in UTC, nil for nil.
func utcP(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullTime returns nil for the zero time (SQL NULL), else t.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// nullBytes returns nil for an empty value (SQL NULL), else the bytes as text.
func nullText(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

// micros converts a duration to microseconds.
func micros(d time.Duration) int64 { return d.Microseconds() }
