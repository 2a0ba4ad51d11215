// Package sqlitestore is the embedded default store of idem: one SQLite file,
// zero set-up, single node. It implements store.Store on modernc.org/sqlite
// (pure Go, no cgo).
//
// Design for throughput:
//   - One writer connection owned by one goroutine. Callers submit write
//     operations to an internal/batch Runner; the writer takes everything
//     queued (up to Config.MaxBatchOps operations or Config.MaxBatchItems
//     items), runs the operations back to back — and, after a database
//     error, again with one SAVEPOINT each, so a failing operation rolls
//     back only itself — commits once and then answers every caller (group
//     commit). One fsync thus covers many concurrent enqueues.
//   - With Synchronous FULL (the default) a separate goroutine fsyncs the WAL
//     after each group commit and only then answers the group's callers, so
//     the writer executes the next group while the previous one is synced.
//   - Job ids are allocated by the writer (no AUTOINCREMENT), so a batch of
//     plain jobs goes in as multi-row INSERTs, and so do the one-job
//     enqueues of one group commit: their rows wait in the writer until
//     the next other operation or the COMMIT (wtx.deferred).
//   - Reads use a separate pool of query_only connections; in WAL mode they
//     never wait for the writer.
//   - Times are INTEGER unix microseconds (UTC); JSON is stored as BLOB.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

var _ store.Store = (*Store)(nil)

// Defaults of Config.
const (
	// DefaultBusyTimeout is how long a connection waits for a lock held by
	// another process before failing with SQLITE_BUSY.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultSynchronous is the PRAGMA synchronous level: FULL makes every
	// committed transaction durable across power loss.
	DefaultSynchronous = "FULL"
	// DefaultReadConns is the size of the read-only connection pool.
	DefaultReadConns = 4
	// DefaultMaxBatchOps is the most write operations combined into one
	// transaction by the writer.
	DefaultMaxBatchOps = 256
	// DefaultMaxBatchItems is the most items (jobs inserted, claimed or
	// finished) combined into one transaction by the writer; a single
	// operation larger than this still runs, alone.
	DefaultMaxBatchItems = 8192
	// DefaultCacheSizeKiB is the page cache per connection, in KiB.
	DefaultCacheSizeKiB = 32 * 1024
	// DefaultMmapSize is the memory-mapped I/O size in bytes.
	DefaultMmapSize = 256 << 20
)

// Config configures a Store. The zero value (or a nil *Config) uses the
// defaults above.
type Config struct {
	// BusyTimeout: how long to wait for a lock held by another process.
	// Default DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Synchronous is "FULL" (default) or "NORMAL".
	//
	// FULL: no write is acknowledged before the WAL holding it is fsynced,
	// so an acknowledged job survives power loss. (The connection runs at
	// SQLite's NORMAL and the store fsyncs the WAL itself after each group
	// commit, off the writer's critical path; reads may see a group a
	// moment before it is durable, acknowledgements never do.)
	//
	// NORMAL: no fsync per commit, only at checkpoints: faster, and still
	// safe against process crashes, but the last transactions acknowledged
	// before a power loss or OS crash may be lost (the database stays
	// consistent). Group commit shares one fsync among every operation of a
	// group, so FULL is usually affordable.
	Synchronous string
	// ReadConns is the size of the read-only connection pool. Default
	// DefaultReadConns.
	ReadConns int
	// MaxBatchOps is the most write operations per group commit. Default
	// DefaultMaxBatchOps.
	MaxBatchOps int
	// MaxBatchItems is the most items (jobs) per group commit. Default
	// DefaultMaxBatchItems.
	MaxBatchItems int
	// CacheSizeKiB is the page cache size per connection in KiB. Default
	// DefaultCacheSizeKiB.
	CacheSizeKiB int
	// MmapSize is the memory-mapped I/O size in bytes; negative disables it.
	// Default DefaultMmapSize.
	MmapSize int64
	// SkipMigrate: do not run migrations at Open (call Migrate yourself).
	SkipMigrate bool
	// Logger receives the writer's diagnostics. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.BusyTimeout <= 0 {
		out.BusyTimeout = DefaultBusyTimeout
	}
	switch strings.ToUpper(out.Synchronous) {
	case "":
		out.Synchronous = DefaultSynchronous
	case "FULL", "NORMAL":
		out.Synchronous = strings.ToUpper(out.Synchronous)
	default:
		return out, fmt.Errorf("sqlitestore: synchronous %q: want FULL or NORMAL", c.Synchronous)
	}
	if out.ReadConns <= 0 {
		out.ReadConns = DefaultReadConns
	}
	if out.MaxBatchOps <= 0 {
		out.MaxBatchOps = DefaultMaxBatchOps
	}
	if out.MaxBatchItems <= 0 {
		out.MaxBatchItems = DefaultMaxBatchItems
	}
	if out.CacheSizeKiB <= 0 {
		out.CacheSizeKiB = DefaultCacheSizeKiB
	}
	if out.MmapSize == 0 {
		out.MmapSize = DefaultMmapSize
	}
	if out.MmapSize < 0 {
		out.MmapSize = 0
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out, nil
}

// Store is the SQLite implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	cfg  Config
	wdb  *sql.DB // one connection, used only by the writer goroutine
	rdb  *sql.DB // read-only pool
	w    *writer
	once sync.Once
	// rstmts caches prepared statements of the fixed read queries: parsing
	// and planning a query costs more than running these point lookups.
	rstmts sync.Map // query → *sql.Stmt
	// cursors rotate fair claims among tenants (see JobClaim).
	cursors store.ClaimCursors
	// lock is the process lock of the database file, when this Store got it
	// (see lockProcess): at most one Store holds it, and that one keeps the
	// key filter.
	lock *os.File
	// open is the open-files lock of the database file (see lockOpenFiles),
	// held shared from Open until Close has closed the connections: it
	// tells other Stores that this one has the file open, so none of them
	// clears the leader rows this one may write (see takeOverLeaders).
	// nil for ":memory:", URIs and where flock is not available.
	open *os.File
	// keys is the filter of recorded keys, kept when this Store holds lock
	// (nil otherwise: every keyed insert reads first).
	keys *keyFilter
	// ann are the functions told of the queues that writes of this store
	// made jobs available in, where its callers cannot tell (Announce).
	ann announcers
}

// FilePath returns the file a "file:" URI names ("file:rel.db",
// "file:/abs.db", "file:///abs.db", escapes decoded), so that it is opened
// as a plain path with all that goes with one (lock files, the WAL fsync);
// other paths are returned as they are (Open takes either). A query or
// fragment is refused (ErrInvalid):
// idem sets the connections' pragmas itself, and SQLite's own URI
// parameters (mode=ro, cache=shared, vfs=…) would break what the store
// relies on.
func FilePath(path string) (string, error) {
	if !strings.HasPrefix(path, "file:") {
		return path, nil
	}
	u, err := url.Parse(path)
	if err != nil {
		return "", idemtype.Invalid("path", "a file: URI that does not parse: %v", err)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", idemtype.Invalid("path", "a file: URI with a query or fragment (%q): idem sets the connection's parameters itself; give the file alone", path)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", idemtype.Invalid("path", "a file: URI naming host %q: only a local file", u.Host)
	}
	p := u.Path
	if u.Opaque != "" { // file:rel.db
		if p, err = url.PathUnescape(u.Opaque); err != nil {
			return "", idemtype.Invalid("path", "a file: URI with a bad escape: %v", err)
		}
	}
	if p == "" {
		return "", idemtype.Invalid("path", "a file: URI without a file")
	}
	return p, nil
}

// uriPath escapes the characters of a file path that end or escape the
// path part of a "file:" URI, so a path holding '#' or '?' (t.TempDir of a
// fuzz seed, "seed#3") opens that file and not a truncated name.
func uriPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// createPrivate creates the database file with mode 0600 when it does not
// exist yet: SQLite gives the WAL and shared-memory files the mode of the
// database file, so jobs, results and API key hashes are readable by the
// owner only. An existing file keeps its mode; ":memory:" and URIs are
// left alone.
func createPrivate(path string) error {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return f.Close()
}

// realPath returns path with its symbolic links resolved, as SQLite
// resolves them before it names the WAL and shared-memory files; path
// itself when it cannot be resolved, for ":memory:" and for URIs.
func realPath(path string) string {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return path
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// Open opens (creating, mode 0600) the SQLite database at path, starts the
// writer and, unless cfg.SkipMigrate, migrates the schema. cfg may be nil.
// An in-memory database (":memory:", "file::memory:") or the empty path
// is refused (ErrInvalid): the store's connections would not share it.
func Open(ctx context.Context, path string, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if path, err = FilePath(path); err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" {
		// The writer and each reader are separate connections: each would
		// get its own empty database (writes invisible to reads, "no such
		// table"). A shared-cache in-memory database would be shared, but
		// has no WAL and answers SQLITE_LOCKED, which busy_timeout does not
		// wait out, to a reader while the writer writes.
		return nil, idemtype.Invalid("path", "%q is an in-memory or temporary SQLite database, which the store's connections would not share; give the path of a file", path)
	}
	common := func(v url.Values) {
		v.Add("_pragma", "busy_timeout("+strconv.FormatInt(c.BusyTimeout.Milliseconds(), 10)+")")
		v.Add("_pragma", "cache_size(-"+strconv.Itoa(c.CacheSizeKiB)+")")
		v.Add("_pragma", "mmap_size("+strconv.FormatInt(c.MmapSize, 10)+")")
		v.Add("_pragma", "temp_store(MEMORY)")
	}
	if err := createPrivate(path); err != nil {
		return nil, err
	}
	wv := url.Values{}
	common(wv)
	wv.Set("_journal_mode", "WAL")
	// FULL is implemented as NORMAL plus an fsync of the WAL by the store
	// after each group commit (see writer.syncLoop): as durable as FULL,
	// but the next group runs while the previous one is being synced.
	wv.Set("_synchronous", "NORMAL")
	wdb, err := sql.Open("sqlite", "file:"+uriPath(path)+"?"+wv.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	conn, err := connectWriter(ctx, wdb, c.BusyTimeout)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	rv := url.Values{}
	common(rv)
	rv.Set("_query_only", "1")
	rdb, err := sql.Open("sqlite", "file:"+uriPath(path)+"?"+rv.Encode())
	if err != nil {
		conn.Close()
		wdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(c.ReadConns)
	rdb.SetMaxIdleConns(c.ReadConns)

	s := &Store{cfg: c, wdb: wdb, rdb: rdb}
	// SQLite names the WAL after the file a symbolic link points to; so do
	// the fsync and the lock files, or a Store opened through a link would
	// fsync no WAL and miss the Stores that opened the real name.
	resolved := realPath(path)
	walPath := ""
	if c.Synchronous == "FULL" {
		walPath = resolved + "-wal"
	}
	s.w = newWriter(conn, c.MaxBatchOps, c.MaxBatchItems, c.Logger, walPath)
	if resolved != "" && resolved != ":memory:" && !strings.HasPrefix(resolved, "file:") {
		s.w.gate, s.w.gateWait = openWriteGate(resolved), c.BusyTimeout
	}
	s.w.start()
	if !c.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.lockFile(ctx, resolved); err != nil {
		s.Close()
		return nil, err
	}
	if s.lock != nil && !c.SkipMigrate {
		s.keys = newKeyFilter(ctx, s.scanKeys, minKeyFilterCap, c.Logger)
	}
	return s, nil
}

// connectWriter opens the writer's connection. Switching a new database to
// WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once, without
// calling the busy handler, when two processes (or two Stores) open the same
// new file at the same moment and both try to upgrade their locks; the
// loser retries here until busyTimeout has passed.
func connectWriter(ctx context.Context, db *sql.DB, busyTimeout time.Duration) (*sql.Conn, error) {
	deadline := time.Now().Add(busyTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		conn, err := db.Conn(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// scanKeys calls each with the (tenant, key) of every idempotency record,
// for the key filter.
func (s *Store) scanKeys(ctx context.Context, each func(tenant, key string)) error {
	rows, err := s.rdb.QueryContext(ctx, "SELECT tenant, key FROM idem_keys")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var tenant, key string
		if err := rows.Scan(&tenant, &key); err != nil {
			return err
		}
		each(tenant, key)
	}
	return rows.Err()
}

// errOpenFilesUnlocked: the open-files lock could not be taken (its file
// cannot be opened, or the file system has no flock).
var errOpenFilesUnlocked = errors.New("open-files lock not available")

// lockFile takes the locks of the database file at path, before Open
// returns and so before this Store can write a leader row: the process
// lock when it is free, and the open-files lock, shared — exclusive first,
// for a takeover of the leader rows, when this Store got the process lock
// and no other Store has the file open. ":memory:" and URIs take neither.
//
// An error (ctx ended, or another Store held the open-files lock
// exclusively for far longer than a takeover takes) fails Open: a Store
// that other Stores cannot see could lose its leader row to their
// takeover. A lock file that cannot be used at all is only logged.
func (s *Store) lockFile(ctx context.Context, path string) error {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	s.lock = lockProcess(path)
	// A takeover holds the open-files lock for one write transaction, which
	// waits at most its busy timeout for SQLite's lock.
	wait := max(time.Minute, 2*s.cfg.BusyTimeout)
	open, exclusive, err := lockOpenFiles(ctx, path, s.lock != nil, wait)
	if errors.Is(err, errOpenFilesUnlocked) {
		// No Store on this file can then clear the leader rows: elections
		// work by expiry, only a faster takeover is lost.
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sqlitestore: no leader takeover", slog.Any("err", err))
		return nil
	}
	if err != nil {
		return err
	}
	s.open = open
	if !exclusive {
		return nil
	}
	if err := s.takeOverLeaders(ctx); err != nil {
		// Only a faster takeover is lost: elections still work by expiry.
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sqlitestore: leader takeover", slog.Any("err", err))
	}
	// The write has ended (committed or rolled back: the writer answers a
	// taken operation only then), so no DELETE runs after this point.
	return shareOpenFiles(s.open)
}

// takeOverLeaders clears the leader rows of processes that are provably
// gone, so that a new leader takes over at once after a restart or a crash
// instead of waiting out the old term. It runs only while this Store holds
// the open-files lock exclusively (see lockFile): every other Store holds
// that lock shared from before its Open returns until its Close, and a
// process that ends loses its locks, so no Store that could have written a
// leader row, in this process or another, still has the file open.
//
// The process lock alone does not tell that: a Store opened while another
// held it keeps the file open, and may lead, after the holder closed. The
// takeover still needs the process lock too (only its holder tries for the
// exclusive lock), so a Store of an earlier idem, which took no open-files
// lock but held the process lock when it was first, is never taken over.
func (s *Store) takeOverLeaders(ctx context.Context) error {
	var cleared int64
	err := s.write(ctx, 1, func(t *wtx) error {
		// A database opened with SkipMigrate before its first migration
		// (idem migrate on a new file) has no leaders table yet: nothing
		// to clear.
		var n int
		if err := t.queryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'leaders'").Scan(&n); err != nil || n == 0 {
			return err
		}
		res, err := t.exec("DELETE FROM leaders")
		if err == nil {
			cleared, _ = res.RowsAffected()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("clear leaders of ended processes: %w", err)
	}
	if cleared > 0 {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "cleared the leader rows of an ended process", slog.Int64("rows", cleared))
	}
	return nil
}

// Close stops the writer (operations still waiting are answered with
// store.ErrClosed) and closes the connections. It is idempotent.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.keys.close() // a background scan must end before the read pool closes
		s.w.stop()
		s.rstmts.Range(func(_, st any) bool { st.(*sql.Stmt).Close(); return true })
		err = errors.Join(s.w.close(), s.wdb.Close(), s.rdb.Close())
		s.w.gate.close()
		if s.lock != nil {
			err = errors.Join(err, s.lock.Close()) // releases the process lock
		}
		if s.open != nil {
			// Last: the connections are closed, this Store writes no more
			// leader rows, and another Store may take them over.
			err = errors.Join(err, s.open.Close())
		}
	})
	return err
}

// write runs fn in the writer's next group commit and waits for its outcome.
// weight is the number of items the operation handles (for batch sizing).
func (s *Store) write(ctx context.Context, weight int, fn func(w *wtx) error) error {
	return s.w.submit(ctx, weight, writeReq{fn: fn})
}

// readRow runs a fixed read query through a cached prepared statement.
func (s *Store) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st, err := s.readStmt(ctx, q); err == nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.rdb.QueryRowContext(ctx, q, args...) // surfaces the error
}

// readRows is readRow for queries that return many rows.
func (s *Store) readRows(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) readStmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := s.rstmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.rstmts.LoadOrStore(q, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// readErr maps errors of the read pool after Close to store.ErrClosed (a
// statement prepared before Close fails as closed, the pool as well).
func (s *Store) readErr(err error) error {
	if err != nil && s.w.isClosed() && (strings.Contains(err.Error(), "database is closed") ||
		strings.Contains(err.Error(), "statement is closed")) {
		return store.ErrClosed
	}
	return err
}
