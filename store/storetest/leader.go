package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func leaderCases() []testCase {
	return []testCase{
		{"Leader/election", testLeader},
		{"Leader/resign", testLeaderResign},
	}
}

func apiKeyCases() []testCase {
	return []testCase{
		{"APIKeys/lifecycle", testAPIKeys},
	}
}

// lead runs one LeaderAttempt with a 30 s term.
func lead(t *testing.T, s store.Store, name, owner string, now time.Time) bool {
	t.Helper()
	ok, err := s.LeaderAttempt(t.Context(), &store.LeaderParams{Name: name, Owner: owner, TTL: 30 * time.Second, Now: now})
	if err != nil {
		t.Fatalf("LeaderAttempt(%s, %s): %v", name, owner, err)
	}
	return ok
}

func testLeader(t *testing.T, s store.Store) {
	steps := []struct {
		owner string
		at    time.Duration
		want  bool
	}{
		{"A", 0, true},                 // nobody leads
		{"B", 10 * time.Second, false}, // A's term runs to 30s
		{"A", 20 * time.Second, true},  // extends to 50s
		{"B", 40 * time.Second, false}, // still A's
		{"B", 51 * time.Second, true},  // A's term expired
		{"A", 52 * time.Second, false}, // B leads to 81s
		{"B", 60 * time.Second, true},  // extends to 90s
	}
	for _, st := range steps {
		if got := lead(t, s, "maintenance", st.owner, at(st.at)); got != st.want {
			t.Errorf("%s at +%v: leads %v, want %v", st.owner, st.at, got, st.want)
		}
	}
	// Names are independent.
	if !lead(t, s, "other", "A", at(60*time.Second)) {
		t.Errorf("A refused for an unrelated name")
	}
}

func testLeaderResign(t *testing.T, s store.Store) {
	if !lead(t, s, "m", "A", at(0)) {
		t.Fatalf("A refused")
	}
	if err := s.LeaderResign(t.Context(), &store.LeaderResignParams{Name: "m", Owner: "B"}); err != nil {
		t.Fatalf("LeaderResign by a non-leader: %v", err)
	}
	if lead(t, s, "m", "B", at(time.Second)) {
		t.Errorf("B leads after a resign by B, who did not lead")
	}
	if err := s.LeaderResign(t.Context(), &store.LeaderResignParams{Name: "m", Owner: "A"}); err != nil {
		t.Fatalf("LeaderResign: %v", err)
	}
	if !lead(t, s, "m", "B", at(2*time.Second)) {
		t.Errorf("B refused after A resigned")
	}
	if lead(t, s, "m", "A", at(3*time.Second)) {
		t.Errorf("A leads while B's term runs")
	}
}

func testAPIKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	k1 := &store.APIKey{ID: "k1", Hash: hash("secret1"), Tenant: "default", Admin: true, Name: "admin", CreatedAt: at(0)}
	k2 := &store.APIKey{ID: "k2", Hash: hash("secret2"), Tenant: "t2", Name: "tenant two", CreatedAt: at(time.Minute)}
	wantOK(t, "create k1", s.APIKeyCreate(ctx, k1))
	wantOK(t, "create k2", s.APIKeyCreate(ctx, k2))
	wantErr(t, "duplicate id", s.APIKeyCreate(ctx, &store.APIKey{ID: "k1", Hash: hash("other"), Tenant: "x", CreatedAt: at(0)}), idemtype.ErrInvalid)

	got, err := s.APIKeyByHash(ctx, &store.APIKeyByHashParams{Hash: hash("secret2")})
	if err != nil {
		t.Fatalf("APIKeyByHash: %v", err)
	}
	if got.ID != "k2" || got.Hash != k2.Hash || got.Tenant != "t2" || got.Admin || got.Name != "tenant two" || got.RevokedAt != nil {
		t.Errorf("by hash: %+v", got)
	}
	wantTime(t, "CreatedAt", got.CreatedAt, at(time.Minute))
	_, err = s.APIKeyByHash(ctx, &store.APIKeyByHashParams{Hash: hash("nope")})
	wantErr(t, "unknown hash", err, idemtype.ErrNotFound)

	wantOK(t, "revoke", s.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: "k1", Now: at(time.Hour)}))
	_, err = s.APIKeyByHash(ctx, &store.APIKeyByHashParams{Hash: hash("secret1")})
	wantErr(t, "revoked key by hash", err, idemtype.ErrNotFound)
	wantErr(t, "revoke unknown", s.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: "nope", Now: at(time.Hour)}), idemtype.ErrNotFound)

	keys, err := s.APIKeyList(ctx)
	if err != nil {
		t.Fatalf("APIKeyList: %v", err)
	}
	if len(keys) != 2 || keys[0].ID != "k1" || keys[1].ID != "k2" {
		t.Fatalf("list: %v", keys)
	}
	if !keys[0].Admin || keys[0].Tenant != "default" || keys[0].Hash != k1.Hash {
		t.Errorf("listed k1: %+v", keys[0])
	}
	wantTimeP(t, "RevokedAt", keys[0].RevokedAt, at(time.Hour))
	wantNil(t, "RevokedAt of k2", keys[1].RevokedAt)
}
