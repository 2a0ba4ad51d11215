package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/idem-dev/idem/idemclient"
)

// Cookie names.
const (
	sessionCookie = "idem_session"
	tenantCookie  = "idem_tenant"
	flashCookie   = "idem_flash"
)

// session is the signed-in caller: the API key, whether it is an admin
// key, and the tenant an admin chose ("" = the key's own).
type session struct {
	nonce  string
	key    string
	admin  bool
	tenant string
	csrf   string
}

// session reads the session cookie; ok is false when nobody is signed in.
func (h *Handler) session(r *http.Request) (*session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	parts := strings.SplitN(c.Value, ".", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" || (parts[1] != "a" && parts[1] != "t") {
		return nil, false
	}
	s := &session{nonce: parts[0], admin: parts[1] == "a", key: parts[2]}
	s.csrf = csrfToken(s.key, s.nonce)
	if t, err := r.Cookie(tenantCookie); err == nil && s.admin {
		s.tenant = t.Value
	}
	return s, true
}

// csrfToken is the per-session token every POST form carries: an HMAC of
// the session's nonce keyed by its API key. It needs no secret of this
// process, so every node behind a load balancer (and a restarted one)
// accepts the forms another rendered; a cross-site page knows neither the
// key nor the nonce (both only in the HttpOnly cookie), so it cannot make it.
func csrfToken(key, nonce string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("idem-ui-csrf:" + nonce))
	return hex.EncodeToString(m.Sum(nil))
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// sameOrigin refuses cross-site requests by their Fetch metadata and Origin.
func sameOrigin(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errors.New("cross-site request refused")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errors.New("request from another origin refused")
		}
	}
	return nil
}

// checkPost enforces the CSRF defences of a state-changing request.
func (h *Handler) checkPost(r *http.Request, s *session) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	if err := r.ParseForm(); err != nil {
		return errors.New("unreadable form")
	}
	tok := r.PostForm.Get("csrf")
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.csrf)) != 1 {
		return errors.New("missing or wrong CSRF token: reload the page and try again")
	}
	return nil
}

// authed runs next with the session, sending visitors to sign in and
// refusing POSTs that fail the CSRF checks.
func (h *Handler) authed(next func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.session(r)
		if !ok {
			if r.Method != http.MethodGet {
				h.render(w, r, http.StatusForbidden, "error", nil, &errorPage{Title: "Sign in first",
					Message: "This action needs a signed-in session."})
				return
			}
			http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			if err := h.checkPost(r, s); err != nil {
				h.render(w, r, http.StatusForbidden, "error", s, &errorPage{Title: "Refused", Message: err.Error()})
				return
			}
		}
		next(w, r, s)
	}
}

type loginPage struct {
	Next, Error, Tenant string
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", nil, &loginPage{Next: safeNext(r.URL.Query().Get("next"))})
}

// safeNext keeps redirects inside the dashboard.
func safeNext(n string) string {
	if !strings.HasPrefix(n, Prefix) || strings.HasPrefix(n, "//") || strings.Contains(n, "\\") {
		return Prefix
	}
	return n
}

// login checks the key against the API and starts a session.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		h.render(w, r, http.StatusForbidden, "error", nil, &errorPage{Title: "Refused", Message: err.Error()})
		return
	}
	_ = r.ParseForm()
	key := strings.TrimSpace(r.PostForm.Get("key"))
	tenant := strings.TrimSpace(r.PostForm.Get("tenant"))
	page := &loginPage{Next: safeNext(r.PostForm.Get("next")), Tenant: tenant}
	if key == "" || strings.ContainsAny(key, ". ;,\"") || len(key) > 512 {
		page.Error = "Enter an API key (it starts with idem_)."
		h.render(w, r, http.StatusBadRequest, "login", nil, page)
		return
	}
	s := &session{key: key}
	if _, err := h.client(s).Stats(r.Context()); err != nil {
		page.Error = loginError(err)
		h.render(w, r, http.StatusUnauthorized, "login", nil, page)
		return
	}
	s.admin = h.isAdmin(r.Context(), key)
	if tenant != "" {
		s.tenant = tenant
		if _, err := h.client(s).Stats(r.Context()); err != nil {
			page.Error = "Tenant " + tenant + ": " + problemText(err)
			h.render(w, r, http.StatusForbidden, "login", nil, page)
			return
		}
	}
	var b [18]byte
	_, _ = rand.Read(b[:])
	role := "t"
	if s.admin {
		role = "a"
	}
	setCookie(w, r, sessionCookie, base64.RawURLEncoding.EncodeToString(b[:])+"."+role+"."+key, 0)
	setCookie(w, r, tenantCookie, tenant, -1)
	if tenant != "" {
		setCookie(w, r, tenantCookie, tenant, 0)
	}
	http.Redirect(w, r, page.Next, http.StatusSeeOther)
}

// isAdmin asks the API whether key may act in another tenant.
func (h *Handler) isAdmin(ctx context.Context, key string) bool {
	_, err := h.client(&session{key: key, tenant: "idem-ui-admin-probe"}).Stats(ctx)
	return err == nil
}

func loginError(err error) string {
	var pe *idemclient.Error
	if errors.As(err, &pe) && pe.Status == http.StatusUnauthorized {
		return "Unknown or revoked API key."
	}
	return "Could not check the key: " + problemText(err)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	setCookie(w, r, sessionCookie, "", -1)
	setCookie(w, r, tenantCookie, "", -1)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// switchTenant lets an admin key act in another tenant.
func (h *Handler) switchTenant(w http.ResponseWriter, r *http.Request, s *session) {
	t := strings.TrimSpace(r.PostForm.Get("tenant"))
	if !s.admin {
		h.flash(w, r, "error", "Only admin keys can switch tenant; this key sees its own tenant only.")
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	probe := *s
	probe.tenant = t
	if t != "" {
		if _, err := h.client(&probe).Stats(r.Context()); err != nil {
			h.flash(w, r, "error", "Tenant "+t+": "+problemText(err))
			http.Redirect(w, r, Prefix, http.StatusSeeOther)
			return
		}
		setCookie(w, r, tenantCookie, t, 0)
	} else {
		setCookie(w, r, tenantCookie, "", -1)
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// flash leaves a one-time message for the next page.
func (h *Handler) flash(w http.ResponseWriter, r *http.Request, kind, msg string) {
	setCookie(w, r, flashCookie, kind+":"+base64.RawURLEncoding.EncodeToString([]byte(msg)), 60)
}

// takeFlash reads and clears the one-time message.
func takeFlash(w http.ResponseWriter, r *http.Request) (kind, msg string) {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return "", ""
	}
	setCookie(w, r, flashCookie, "", -1)
	k, v, _ := strings.Cut(c.Value, ":")
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || (k != "ok" && k != "error") {
		return "", ""
	}
	return k, string(b)
}
