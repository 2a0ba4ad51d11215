package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestRacingClaimsOverDueBacklogWakeEmpty: claims racing over a queue whose
// jobs all just became due. The first claim to run promotes them all in its
// transaction (SKIP LOCKED): a claim running meanwhile neither sees them
// (not committed) nor promotes them (locked), and comes back empty while
// due work exists. Each claimer is a node as a producer is: its own
// LISTEN, room for 35 jobs it never finishes, claims of up to five while
// it has room and its last claim took some (a full claim, again at once);
// after an empty claim it waits for a notification of its queue. Forty
// jobs: the first node cannot take them all, so the backlog is taken only
// if the nodes that came back empty are woken — by the notification of
// the claim that promoted them and took fewer (not by a poll: each waits
// far longer than a notification takes, and that wait running out is the
// test failing). Before, such a claim sent nothing and the other nodes
// waited for their next poll while the jobs sat available. (A claim whose
// promotion kept locks on jobs another claim made available, see
// qClaimPromote, takes them with its next claims: it has the room.) Ten
// rounds, each on a queue of its own, so that the race happens; it logs
// how many claims came back empty with jobs left.
func TestRacingClaimsOverDueBacklogWakeEmpty(t *testing.T) {
	t.Parallel()
	const (
		nodes    = 4
		room     = 35
		perClaim = 5
		due      = 40
		rounds   = 10
		poll     = 20 * time.Second // the wait that stands for a node's poll
	)
	s := newTestStore(t, 2*nodes)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	listens := make([]<-chan string, nodes)
	for i := range listens {
		ch, err := s.Listen(ctx)
		if err != nil {
			t.Fatal(err)
		}
		listens[i] = ch
	}
	now := time.Now().UTC()
	var empties, woken int
	for r := range rounds {
		queue := fmt.Sprint("race", r)
		var ps []*store.JobInsertParams
		for range due {
			ps = append(ps, &store.JobInsertParams{Tenant: "default", Queue: queue, Kind: "k",
				Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now.Add(time.Minute)})
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
			t.Fatal(err)
		}
		at := now.Add(2 * time.Minute) // all due
		var (
			claimed   atomic.Int64
			allOnce   sync.Once
			all       = make(chan struct{})
			mu        sync.Mutex
			ids       = map[int64]int{}
			roundEmpt int
			roundWoke int
			start     = make(chan struct{})
			wg        sync.WaitGroup
		)
		for n := range nodes {
			wg.Go(func() {
				<-start
				held := 0
				for held < room {
					jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, WorkerID: fmt.Sprint("node", n),
						Limit: min(perClaim, room-held), LeaseUntil: at.Add(time.Hour), Now: at})
					if err != nil {
						t.Errorf("node %d: claim: %v", n, err)
						return
					}
					held += len(jobs)
					mu.Lock()
					for _, j := range jobs {
						ids[j.ID]++
					}
					mu.Unlock()
					if claimed.Add(int64(len(jobs))) == due {
						allOnce.Do(func() { close(all) })
					}
					if len(jobs) > 0 {
						continue
					}
					select {
					case <-all:
						return // nothing left: the rest were taken
					default:
					}
					mu.Lock()
					roundEmpt++
					mu.Unlock()
					switch waitQueue(listens[n], queue, all, poll) {
					case waitTimedOut:
						t.Errorf("round %d: node %d (holding %d of its %d) came back empty with %d of %d due jobs unclaimed and was not woken within %v",
							r, n, held, room, due-int(claimed.Load()), due, poll)
						return
					case waitAllTaken:
						return
					}
					mu.Lock()
					roundWoke++
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			rows, err := s.pool.Query(ctx, s.sql(`SELECT state::text, count(*) FROM {schema}.jobs WHERE queue = $1 GROUP BY 1`), queue)
			if err == nil {
				for rows.Next() {
					var st string
					var k int
					if rows.Scan(&st, &k) == nil {
						t.Logf("round %d: %d jobs %s", r, k, st)
					}
				}
				rows.Close()
			}
			return
		}
		if len(ids) != due {
			t.Errorf("round %d: %d distinct jobs claimed, want %d", r, len(ids), due)
		}
		for id, k := range ids {
			if k != 1 {
				t.Errorf("round %d: job %d claimed %d times", r, id, k)
			}
		}
		empties += roundEmpt
		woken += roundWoke
	}
	t.Logf("%d claims came back empty while due jobs were left; %d of their nodes were woken by a notification", empties, woken)
}

// waitEnd is how waitQueue ended.
type waitEnd int

const (
	waitNotified waitEnd = iota // a notification of the queue came
	waitAllTaken                // the other nodes took the rest meanwhile
	waitTimedOut                // neither within the poll
)

// waitQueue waits for a notification of queue (or "", a reconnect) on ch,
// for all to close, or for poll to pass.
func waitQueue(ch <-chan string, queue string, all <-chan struct{}, poll time.Duration) waitEnd {
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		select {
		case q, ok := <-ch:
			if !ok {
				return waitTimedOut
			}
			if q == queue || q == "" {
				return waitNotified
			}
		case <-all:
			return waitAllTaken
		case <-timer.C:
			return waitTimedOut
		}
	}
}
