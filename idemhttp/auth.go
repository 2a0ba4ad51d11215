package idemhttp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// APIKeyPrefix starts every secret made by NewAPIKey.
const APIKeyPrefix = "idem_"

// NewAPIKey returns a fresh secret ("idem_" + 32 random bytes, base64url)
// and the stored form of it (hash only). The secret is shown once.
func NewAPIKey(tenant string, admin bool, name string, now time.Time) (secret string, k *store.APIKey) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	secret = APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	if tenant == "" {
		tenant = idem.DefaultTenant
	}
	k = &store.APIKey{ID: "key_" + store.NewToken()[:16], Hash: HashAPIKey(secret), Tenant: tenant,
		Admin: admin, Name: name, CreatedAt: now.UTC()}
	return secret, k
}

// HashAPIKey is the stored form of a secret: hex SHA-256.
func HashAPIKey(secret string) string {
	var hash [sha256.Size * 2]byte
	hashAPIKey(&hash, secret)
	return string(hash[:])
}

// hashAPIKey writes HashAPIKey(secret) into hash without allocating (for a
// secret of up to maxBearerLen bytes, which bearer allows).
func hashAPIKey(hash *[sha256.Size * 2]byte, secret string) {
	var sum [sha256.Size]byte
	if len(secret) <= maxBearerLen {
		var buf [maxBearerLen]byte
		sum = sha256.Sum256(buf[:copy(buf[:], secret)])
	} else {
		sum = sha256.Sum256([]byte(secret))
	}
	hex.Encode(hash[:], sum[:])
}

// principal is the authenticated caller of a request.
type principal struct {
	tenant string // the tenant the request acts in
	admin  bool   // the key is an admin key
	keyID  string // the id of the key
	hash   string // the hash of the key's secret
}

type principalKey struct{}

// principalOf returns the caller of an authenticated request: the
// requestInfo's (authenticator.wrap under withRequestID), else the
// context's own principal (a wrap without it).
func principalOf(ctx context.Context) (*principal, bool) {
	if p, ok := ctx.Value(principalKey{}).(*principal); ok {
		return p, true
	}
	if info := requestInfoOf(ctx); info != nil && info.authenticated {
		return &info.principal, true
	}
	return nil, false
}

// tenantOf returns the tenant a request acts in ("" outside auth).
func tenantOf(r *http.Request) string { return TenantFromContext(r.Context()) }

// TenantFromContext returns the tenant of an authenticated API request; the
// Idempotency-Key middleware of the API uses it to scope records.
func TenantFromContext(ctx context.Context) string {
	if p, ok := principalOf(ctx); ok {
		return p.tenant
	}
	return ""
}

// isAdmin reports whether the request was made with an admin key.
func isAdmin(r *http.Request) bool {
	p, ok := principalOf(r.Context())
	return ok && p.admin
}

// authenticator checks bearer keys against the store, with a short cache.
type authenticator struct {
	keys store.APIKeys
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]authEntry // by hash
	// gen counts evictions: a lookup that read the store before an
	// eviction does not cache what it read.
	gen uint64
	// watches cancel the long polls of a key (by id) when evict revokes it.
	watches map[string]map[uint64]context.CancelCauseFunc
	seq     uint64
}

// errKeyRevoked is the cause of the end of a long poll whose key was revoked.
var errKeyRevoked = errors.New("api key revoked")

type authEntry struct {
	key     *store.APIKey
	hash    string // the key of the entry in the cache
	expires time.Time
}

// lookupSecret is lookupHash(HashAPIKey(secret)), and returns that hash
// too: a request whose key is cached is authenticated without allocating
// (the hash is the cached entry's).
func (a *authenticator) lookupSecret(ctx context.Context, secret string) (*store.APIKey, string, error) {
	var hash [sha256.Size * 2]byte
	hashAPIKey(&hash, secret)
	if a.ttl > 0 {
		now := a.now()
		a.mu.Lock()
		e, ok := a.cache[string(hash[:])]
		a.mu.Unlock()
		if ok && now.Before(e.expires) {
			return e.key, e.hash, nil
		}
	}
	h := string(hash[:])
	k, err := a.lookupHash(ctx, h)
	return k, h, err
}

// lookupHash returns the unrevoked key whose secret hashes to hash.
func (a *authenticator) lookupHash(ctx context.Context, hash string) (*store.APIKey, error) {
	now := a.now()
	if a.ttl > 0 {
		a.mu.Lock()
		e, ok := a.cache[hash]
		a.mu.Unlock()
		if ok && now.Before(e.expires) {
			return e.key, nil
		}
	}
	a.mu.Lock()
	gen := a.gen
	a.mu.Unlock()
	k, err := a.keys.APIKeyByHash(ctx, &store.APIKeyByHashParams{Hash: hash})
	if err != nil {
		return nil, err
	}
	if a.ttl > 0 {
		a.mu.Lock()
		defer a.mu.Unlock()
		if gen != a.gen {
			return k, nil // an eviction raced with this read: do not cache it
		}
		if len(a.cache) > 10000 {
			clear(a.cache)
		}
		a.cache[hash] = authEntry{key: k, hash: hash, expires: now.Add(a.ttl)}
	}
	return k, nil
}

// evict drops the cached entries of the key id and ends its long polls,
// so this node refuses a revoked key at once.
func (a *authenticator) evict(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	for h, e := range a.cache {
		if e.key.ID == id {
			delete(a.cache, h)
		}
	}
	for _, cancel := range a.watches[id] {
		cancel(errKeyRevoked)
	}
}

// watch returns ctx ended (cause errKeyRevoked) when evict revokes the key
// of r, for a request that waits (a long poll). The key is checked again
// once watched, so a revocation between the authentication and the watch
// is not missed: errKeyRevoked then. stop ends the watch.
func (a *authenticator) watch(ctx context.Context, r *http.Request) (_ context.Context, stop func(), err error) {
	p, ok := principalOf(r.Context())
	if !ok {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	a.mu.Lock()
	a.seq++
	n := a.seq
	if a.watches == nil {
		a.watches = map[string]map[uint64]context.CancelCauseFunc{}
	}
	if a.watches[p.keyID] == nil {
		a.watches[p.keyID] = map[uint64]context.CancelCauseFunc{}
	}
	a.watches[p.keyID][n] = cancel
	a.mu.Unlock()
	stop = func() {
		a.mu.Lock()
		delete(a.watches[p.keyID], n)
		if len(a.watches[p.keyID]) == 0 {
			delete(a.watches, p.keyID)
		}
		a.mu.Unlock()
		cancel(nil)
	}
	if _, err := a.lookupHash(ctx, p.hash); err != nil {
		stop()
		if errors.Is(err, idemtype.ErrNotFound) {
			err = errKeyRevoked
		}
		return nil, nil, err
	}
	go a.recheck(ctx, p.hash, cancel)
	return ctx, stop, nil
}

// recheck looks the key of a waiting request up again every cache TTL
// until ctx ends, and ends the request (cause errKeyRevoked) once the key
// is gone: a key revoked through another node, which cannot evict it
// here, ends this node's long polls within about two TTLs (the cached
// entry's rest, then a read of the store) instead of at the end of their
// wait. A failed read (the store unreachable) leaves the poll running.
func (a *authenticator) recheck(ctx context.Context, hash string, cancel context.CancelCauseFunc) {
	every := a.ttl
	if every <= 0 {
		every = DefaultAuthCacheTTL // no cache: each lookup reads the store
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := a.lookupHash(ctx, hash); errors.Is(err, idemtype.ErrNotFound) {
			cancel(errKeyRevoked)
			return
		}
	}
}

// revokedKey is the answer to a request whose key is unknown or revoked.
func revokedKey(w http.ResponseWriter) *Problem {
	w.Header().Set("WWW-Authenticate", `Bearer realm="idem", error="invalid_token"`)
	return newProblem(http.StatusUnauthorized, ProblemUnauthorized, "Unauthorized", "unknown or revoked API key")
}

// revokeAPIKey serves DELETE /v1/apikeys/{id} (admin keys only): the key is
// revoked in the store and evicted from this node's cache, so this node
// refuses it at once and ends its long polls; other nodes refuse it within
// their AuthCacheTTL and end its long polls there within about twice it.
func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	if !isAdmin(r) {
		return newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden", "API keys are revoked by admin keys")
	}
	id := r.PathValue("id")
	if id == "" || len(id) > 200 || idem.ValidateKey("id", id) != nil {
		return invalid("id", "want 1 to 200 printable ASCII characters")
	}
	err := s.store.APIKeyRevoke(r.Context(), &store.APIKeyRevokeParams{ID: id, Now: s.now()})
	s.auth.evict(id) // also when the store failed: the next request asks it again
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// wrap authenticates the request and resolves its tenant.
func (a *authenticator) wrap(s *Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="idem"`)
			writeProblem(w, newProblem(http.StatusUnauthorized, ProblemUnauthorized, "Unauthorized",
				"send an API key as Authorization: Bearer <key>"))
			return
		}
		k, hash, err := a.lookupSecret(r.Context(), secret)
		if errors.Is(err, idemtype.ErrNotFound) {
			writeProblem(w, revokedKey(w))
			return
		}
		if err != nil {
			writeError(w, r, s.cfg.Logger, store.Classify(s.store, err))
			return
		}
		p := principal{tenant: k.Tenant, admin: k.Admin, keyID: k.ID, hash: hash}
		if t := headerValue(r.Header, headerTenant); t != "" && t != k.Tenant {
			if !k.Admin {
				writeProblem(w, newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden",
					"a tenant key acts only in its own tenant"))
				return
			}
			err := idem.ValidateName(headerTenant, t)
			if err == nil && t == store.EveryTenant {
				err = idemtype.Invalid(headerTenant, "%q is reserved for default limits", store.EveryTenant)
			}
			if err != nil {
				writeError(w, r, s.cfg.Logger, store.Classify(s.store, err))
				return
			}
			p.tenant = t
		}
		if info := requestInfoOf(r.Context()); info != nil && !info.authenticated {
			// The request's own info (withRequestID): no second context
			// or copy of the request.
			info.principal, info.authenticated = p, true
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, &p)))
	})
}

func bearer(r *http.Request) (string, bool) {
	h := headerValue(r.Header, "Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != "" && len(tok) <= maxBearerLen
}

// maxBearerLen bounds the secret of an Authorization header.
const maxBearerLen = 512
