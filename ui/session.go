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
	"unicode/utf8"

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
	// remote is the browser's address, the remote address of the API
	// calls made for it (their access-log lines name it).
	remote string
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
	s := &session{nonce: parts[0], admin: parts[1] == "a", key: parts[2], remote: r.RemoteAddr}
	s.csrf = csrfToken(s.key, s.nonce)
	if t, err := r.Cookie(tenantCookie); err == nil && s.admin {
		s.tenant = tenantFromCookie(t.Value)
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

// tenantToCookie escapes a tenant name for its cookie: a name may hold
// characters a cookie value cannot (`;`, `"`, `\`), which net/http drops,
// and the session then acted in another tenant ("xy" for "x;y").
func tenantToCookie(tenant string) string { return url.PathEscape(tenant) }

// tenantFromCookie reads the tenant cookie; a value that is not escaped
// (a cookie set before escaping) is the name as it is.
func tenantFromCookie(v string) string {
	if t, err := url.PathUnescape(v); err == nil {
		return t
	}
	return v
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
			if signedOutPoll(w, r) {
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

// signedOutPoll answers a poll of a page (htmx's fragment, the chart's
// JSON) that comes without a session, and reports whether it did. A
// redirect to sign in is followed by the poll itself: htmx swapped the
// sign-in page into the table (and signing in there led to the bare
// fragment), the chart read it as JSON. htmx is told to load the sign-in
// page for the page it polls from instead (HX-Redirect), the chart gets a
// JSON error.
func signedOutPoll(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Header.Get("HX-Request") == "true":
		next := Prefix
		if u, err := url.Parse(r.Header.Get("HX-Current-URL")); err == nil && u.Path != "" {
			next = safeNext(u.RequestURI())
		}
		w.Header().Set("HX-Redirect", Prefix+"login?next="+url.QueryEscape(next))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("Signed out: sign in again.\n"))
		return true
	case r.URL.Path == Prefix+"overview.json":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"signed out: reload the page to sign in again"}` + "\n"))
		return true
	}
	return false
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
	s := &session{key: key, remote: r.RemoteAddr}
	if _, err := h.client(s).Stats(r.Context()); err != nil {
		page.Error = loginError(err)
		h.render(w, r, http.StatusUnauthorized, "login", nil, page)
		return
	}
	s.admin = h.isAdmin(r.Context(), s)
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
	if tenant != "" {
		setCookie(w, r, tenantCookie, tenantToCookie(tenant), 0)
	} else {
		setCookie(w, r, tenantCookie, "", -1)
	}
	http.Redirect(w, r, page.Next, http.StatusSeeOther)
}

// isAdmin asks the API whether the key of s is an admin key: GET
// /v1/stats?all_tenants=true is refused (403) to a tenant key whatever
// its tenant. (A probe acting in some tenant by name took the key of a
// tenant of that name for an admin key.) Any other failure is "not
// admin": the display offers less, and the API decides every call anyway.
func (h *Handler) isAdmin(ctx context.Context, s *session) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://idem.internal/v1/stats?all_tenants=true", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("User-Agent", "idem-ui")
	res, err := (inProcess{api: h.api, remote: s.remote}).RoundTrip(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	return res.StatusCode == http.StatusOK
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
		setCookie(w, r, tenantCookie, tenantToCookie(t), 0)
	} else {
		setCookie(w, r, tenantCookie, "", -1)
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// maxFlash is the longest one-time message, in bytes: base64 makes it
// 4/3 longer, and a browser drops a cookie over 4096 bytes (name and
// value), which left the page with no message at all.
const maxFlash = 2800

// flash leaves a one-time message for the next page; a longer one than
// maxFlash (a bulk action's failures, a long name echoed) is cut.
func (h *Handler) flash(w http.ResponseWriter, r *http.Request, kind, msg string) {
	setCookie(w, r, flashCookie, kind+":"+base64.RawURLEncoding.EncodeToString([]byte(cutFlash(msg))), 60)
}

// cutFlash shortens msg to at most maxFlash bytes, on a character
// boundary, saying it was cut.
func cutFlash(msg string) string {
	if len(msg) <= maxFlash {
		return msg
	}
	const mark = "… (message cut)"
	n := maxFlash - len(mark)
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + mark
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
