package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/idem-dev/idem/idemtype"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The claim token's lock: a give-back never runs between a cut-off claim
// and its late commit.
//
// A claim whose context ends while the server runs its transaction
// returns an error, but the server may still commit it: pgx closes the
// connection and sends a cancel request, and the backend runs what it
// already received (the whole pipeline, COMMIT included) until it next
// reads from or writes to the socket; a cancel request that lands between
// two statements of the pipeline, during the commit or after it is
// ignored. The caller then gives the claim back (producer.GiveBack:
// JobReleaseMany with ClaimToken). Were the release's snapshot taken
// before that commit, it would release nothing, and the claim's jobs would
// stay running under a token nobody holds until the rescuer took them
// back a lease later, with an attempt used.
//
// So every claim transaction takes, in its first statement (qClaimSetup,
// qLockedSetup, qReservedSetup: no extra statement or round trip), the
// transaction-level advisory lock (claimLockClass, hashtext(token)) of its
// lease token, and a release by ClaimToken takes the same lock
// (qClaimTokenWait) before its release statement: it waits until a claim
// transaction holding it has ended, committed or rolled back, and the
// release statement's snapshot, taken after that, sees what it committed.
// A claim of several transactions (later rounds) takes the lock in each.
//
// That leaves a claim transaction that takes the lock after the release
// did: one cut off while its bytes sat unread on the server (the context
// ended as they were written), whose backend was scheduled after the
// give-back's, on another connection, had taken the lock. It happens: a
// race test of claims cut off after a few milliseconds on a loaded machine
// left such a claim's jobs running a few times in a thousand. So the
// release also records the token in claims_given_back (qClaimGivenBack),
// in its transaction, and the claim statement (claimCTEs) claims nothing
// under a token recorded there. The claim statement runs after the lock
// in a snapshot of its own (READ COMMITTED): either the claim's
// transaction took the lock first, and the release, waiting for it, sees
// what it committed; or the release committed first, and the claim
// statement sees the token and claims nothing; a transaction of a claim
// of several (later rounds) likewise. Recorded tokens are forgotten after
// a day, by the next give-back.

// Cost: one advisory lock per claim transaction, in a statement the claim
// sends anyway, and one probe of the (usually empty) primary key of
// claims_given_back per claim statement; a claim writes nothing more. A
// claim without a token (each job gets its own) takes no lock. Tokens are random; two live claims whose
// tokens share a hashtext, or a claim and a release of another token
// sharing it, only wait for each other, never see a wrong result. The lock
// class is per schema (fnv of "idem-claim:" and the schema, as the flow
// and partition classes are), and two-key advisory locks do not share a
// space with the one-key migration lock, so the store's locks do not
// collide with each other unless two 32-bit hashes do (again a wait only).
//
// SQLite needs none of this: a claim there is one transaction of the
// store's single writer, over when JobClaim returns (the writer answers a
// claim only once its group committed or rolled back, whatever the
// context; a claim whose context ended before the writer took it never
// runs), so a release that follows sees its outcome.

// tokenLock is the SQL expression that takes the transaction-level
// advisory lock (class, hashtext(token)) when token (text) is not empty;
// class and token are parameter references.
func tokenLock(class, token string) string {
	return `(SELECT count(*) FROM (SELECT pg_advisory_xact_lock(` + class + `::integer, hashtext(` + token + `::text))
        WHERE ` + token + `::text <> '') tl)`
}

var (
	// qClaimSetup is the first statement of a claim transaction that takes
	// no flow locks: JIT off (see claimOne) and the lock of claim token $2
	// (class $1).
	qClaimSetup = `SELECT set_config('jit', 'off', true), ` + tokenLock("$1", "$2")
	// qClaimOneSetup is qClaimSetup for claimOne, with generic plans for
	// the transaction's statements (qClaimPromote, qClaimOne): PostgreSQL
	// chose them after five runs anyway, except while the queue had no
	// available job: then the custom plans looked cheaper and it planned
	// qClaimOne anew at every poll (1.3 ms of a 2 ms empty claim, against
	// 0.3 ms; migration 0031 made that state common: jobs scheduled for
	// later are outside the claim index).
	qClaimOneSetup = `SELECT set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true), ` +
		tokenLock("$1", "$2")
	// qClaimTokenWait takes the lock of claim token $2 (class $1), waiting
	// for the claim transaction that holds it to end.
	qClaimTokenWait = `SELECT ` + tokenLock("$1", "$2")
	// qClaimGivenBack marks claim token $1 given back at $2 (claimCTEs
	// then claims nothing under it) and forgets the tokens given back a
	// day before.
	qClaimGivenBack = `WITH old AS (
    DELETE FROM {schema}.claims_given_back WHERE given_back_at < $2::timestamptz - interval '1 day'
)
INSERT INTO {schema}.claims_given_back (token, given_back_at) VALUES ($1, $2)
ON CONFLICT (token) DO UPDATE SET given_back_at = excluded.given_back_at`
)

// claimLockClass is the first key of the schema's claim token locks.
func (s *Store) claimLockClass() int32 {
	h := fnv.New32a()
	h.Write([]byte("idem-claim:" + s.schema))
	return int32(h.Sum32())
}

// claimFairLocked runs qClaimFair with args (its last argument the claim's
// token) in a transaction of its own that first takes the token's lock:
// [BEGIN, qClaimSetup, qClaimFair, COMMIT] in one round trip, for the
// claims that run on the pool outside a transaction.
func (s *Store) claimFairLocked(ctx context.Context, pool *pgxpool.Pool, token string, args ...any) ([]*idemtype.JobRow, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.sql(qClaimSetup), s.claimLockClass(), token)
	b.Queue(s.sql(qClaimFair), args...)
	b.Queue("COMMIT")
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out, err := collect(rows, scanClaimed)
	if err != nil {
		return nil, err
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return out, br.Close()
}
