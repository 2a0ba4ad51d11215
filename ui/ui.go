// Package ui is the web dashboard of idem, served by `idem serve` at /ui/:
// an overview of every queue with live counts and health, the job list
// with filters and bulk actions, job details with attempts, the
// dead-letter queue, the result cache, the schedules with their next
// firings, and the limits with their usage and the paused queues.
// Templates and assets are embedded (no CDN; one binary).
//
// The dashboard holds no store: every page calls the HTTP API's own
// handlers in-process through idemclient, with the API key of the signed-in
// session, so authentication, tenant scoping and validation are exactly the
// API's. Filters the API lacks (a value inside args or metadata) run here,
// over pages of the same API list.
package ui

import (
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// Defaults of Config.
const (
	// DefaultScanLimit is the most jobs one page scans for a filter the
	// API lacks (a value inside args or metadata).
	DefaultScanLimit = 2000
	// DefaultRefresh is how often the overview polls for fresh numbers.
	DefaultRefresh = 5 * time.Second
	// DefaultHourScan is the most completed (and the most dead) jobs the
	// overview reads to count and chart the last hour.
	DefaultHourScan = 1000
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the dashboard; nil means every default.
type Config struct {
	// Logger receives errors of the API calls; default slog.Default().
	Logger *slog.Logger
	// ScanLimit bounds the jobs scanned per page by the args and metadata
	// filters; default DefaultScanLimit.
	ScanLimit int
	// Refresh is the overview's polling period; default DefaultRefresh.
	Refresh time.Duration
	// HourScan bounds the jobs of each final state (completed, dead) the
	// overview reads for its last-hour figures, newest first; when more
	// finished in the hour the page says so. Default DefaultHourScan.
	HourScan int
	// Now returns the current time; default time.Now.
	Now func() time.Time
}

// Handler serves the dashboard under Prefix and hands every other request
// to the API handler it wraps.
type Handler struct {
	api    http.Handler
	cfg    Config
	pages  map[string]*template.Template
	static http.Handler
	mux    *http.ServeMux
}

// New returns the dashboard over api, the handler of the HTTP API
// (an *idemhttp.Server or its APIHandler).
func New(api http.Handler, cfg *Config) (*Handler, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ScanLimit <= 0 {
		c.ScanLimit = DefaultScanLimit
	}
	if c.Refresh <= 0 {
		c.Refresh = DefaultRefresh
	}
	if c.HourScan <= 0 {
		c.HourScan = DefaultHourScan
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	h := &Handler{api: api, cfg: c}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h.pages = pages
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	h.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	h.mux = h.routes()
	return h, nil
}

// Mount returns a handler that serves the dashboard under Prefix and api
// for everything else. It panics only if the embedded templates are broken,
// which the package tests rule out.
func Mount(api http.Handler, cfg *Config) http.Handler {
	h, err := New(api, cfg)
	if err != nil {
		panic("ui: " + err.Error())
	}
	return h
}

func (h *Handler) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("GET "+Prefix+"static/", h.staticHandler())
	m.HandleFunc("GET "+Prefix+"login", h.loginPage)
	m.HandleFunc("POST "+Prefix+"login", h.login)
	m.HandleFunc("POST "+Prefix+"logout", h.authed(h.logout))
	m.HandleFunc("POST "+Prefix+"tenant", h.authed(h.switchTenant))
	m.HandleFunc("GET "+Prefix+"{$}", h.authed(h.overview))
	m.HandleFunc("GET "+Prefix+"overview/queues", h.authed(h.overviewQueues))
	m.HandleFunc("GET "+Prefix+"overview.json", h.authed(h.overviewJSON))
	m.HandleFunc("GET "+Prefix+"jobs", h.authed(h.jobs))
	m.HandleFunc("POST "+Prefix+"jobs/bulk", h.authed(h.jobsBulk))
	m.HandleFunc("GET "+Prefix+"jobs/{id}", h.authed(h.job))
	m.HandleFunc("POST "+Prefix+"jobs/{id}/{action}", h.authed(h.jobAction))
	m.HandleFunc("GET "+Prefix+"dlq", h.authed(h.dlq))
	m.HandleFunc("POST "+Prefix+"dlq/selected", h.authed(h.dlqSelected))
	m.HandleFunc("GET "+Prefix+"dlq/requeue", h.authed(h.dlqConfirm))
	m.HandleFunc("POST "+Prefix+"dlq/requeue", h.authed(h.dlqRequeueFilter))
	m.HandleFunc("GET "+Prefix+"cache", h.authed(h.cache))
	m.HandleFunc("GET "+Prefix+"schedules", h.authed(h.schedules))
	m.HandleFunc("POST "+Prefix+"schedules", h.authed(h.schedulePut))
	// The page's forms send the name in the body: as a path segment, "."
	// and ".." (valid names) were removed by the browser. The paths with
	// the name are kept for links and scripts.
	m.HandleFunc("POST "+Prefix+"schedules/trigger", h.authed(h.scheduleTrigger))
	m.HandleFunc("POST "+Prefix+"schedules/delete", h.authed(h.scheduleDelete))
	m.HandleFunc("POST "+Prefix+"schedules/{name}/trigger", h.authed(h.scheduleTrigger))
	m.HandleFunc("POST "+Prefix+"schedules/{name}/delete", h.authed(h.scheduleDelete))
	m.HandleFunc("GET "+Prefix+"limits", h.authed(h.limits))
	m.HandleFunc("POST "+Prefix+"limits/{action}", h.authed(h.limitAction))
	m.HandleFunc(Prefix, h.notFound)
	return m
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	if !strings.HasPrefix(r.URL.Path, Prefix) {
		h.api.ServeHTTP(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; "+
		"script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) staticHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !utf8.ValidString(r.URL.Path) {
			// No file has such a name; the file server answers an
			// invalid fs path with a 500.
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.static.ServeHTTP(w, r)
	})
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(r)
	h.render(w, r, http.StatusNotFound, "error", s, &errorPage{Title: "Not found",
		Message: "There is no dashboard page at " + r.URL.Path + "."})
}
