package idemhttp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
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
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// principal is the authenticated caller of a request.
type principal struct {
	tenant string // the tenant the request acts in
	admin  bool   // the key is an admin key
}

type principalKey struct{}

// tenantOf returns the tenant a request acts in ("" outside auth).
func tenantOf(r *http.Request) string { return TenantFromContext(r.Context()) }

// TenantFromContext returns the tenant of an authenticated API request; the
// Idempotency-Key middleware of the API uses it to scope records.
func TenantFromContext(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(*principal); ok {
		return p.tenant
	}
	return ""
}

// isAdmin reports whether the request was made with an admin key.
func isAdmin(r *http.Request) bool {
	p, ok := r.Context().Value(principalKey{}).(*principal)
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
}

type authEntry struct {
	key     *store.APIKey
	expires time.Time
}

func (a *authenticator) lookup(ctx context.Context, secret string) (*store.APIKey, error) {
	hash := HashAPIKey(secret)
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
		a.cache[hash] = authEntry{key: k, expires: now.Add(a.ttl)}
	}
	return k, nil
}

// evict drops the cached entries of the key id, so this node refuses a
// revoked key at once.
func (a *authenticator) evict(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	for h, e := range a.cache {
		if e.key.ID == id {
			delete(a.cache, h)
		}
	}
}

// revokeAPIKey serves DELETE /v1/apikeys/{id} (admin keys only): the key is
// revoked in the store and evicted from this node's cache, so this node
// refuses it at once; other nodes refuse it within their AuthCacheTTL.
func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	if !isAdmin(r) {
		return errAdminOnly
	}
	id := r.PathValue("id")
	if id == "" || len(id) > 200 || idem.ValidateKey("id", id) != nil {
		return fmt.Errorf("%w: api key id: want 1 to 200 printable ASCII characters", idemtype.ErrInvalid)
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
		k, err := a.lookup(r.Context(), secret)
		if errors.Is(err, idemtype.ErrNotFound) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="idem", error="invalid_token"`)
			writeProblem(w, newProblem(http.StatusUnauthorized, ProblemUnauthorized, "Unauthorized", "unknown or revoked API key"))
			return
		}
		if err != nil {
			writeError(w, r, s.cfg.Logger, store.Classify(s.store, err))
			return
		}
		p := &principal{tenant: k.Tenant, admin: k.Admin}
		if t := r.Header.Get(headerTenant); t != "" && t != k.Tenant {
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
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != "" && len(tok) <= 512
}
