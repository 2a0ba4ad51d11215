package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

// layout is what every page template receives.
type layout struct {
	Title     string
	Nav       string // the nav entry of the page
	Signed    bool
	Admin     bool
	Tenant    string // "" = the key's own tenant
	CSRF      string
	FlashKind string
	Flash     string
	Refresh   int // overview polling, in milliseconds
	Data      any
}

// errorPage is the data of the "error" template.
type errorPage struct {
	Title, Message string
}

var funcs = template.FuncMap{
	"pretty": prettyJSON,
	"ts":     formatTime,
	"tsp": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return formatTime(*t)
	},
	"age": func(s float64) string {
		if s <= 0 {
			return "—"
		}
		return (time.Duration(s) * time.Second).String()
	},
	"pct": func(f *float64) string {
		if f == nil {
			return "—"
		}
		return fmt.Sprintf("%.1f%%", *f*100)
	},
	"join":  strings.Join,
	"mulf":  func(f float64) float64 { return f * 100 },
	"retry": retryText,
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// prettyJSON indents raw JSON; anything else is shown as it is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// parsePages parses every page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

var titles = map[string]string{"overview": "Overview", "jobs": "Jobs", "job": "Job", "dlq": "Dead-letter queue",
	"dlqconfirm": "Requeue dead jobs", "cache": "Result cache", "schedules": "Schedules", "limits": "Limits", "login": "Sign in", "error": "Error"}

var navOf = map[string]string{"job": "jobs", "dlqconfirm": "dlq"}

// render writes a full page; a template failure is logged and answered 500.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, page string, s *session, data any) {
	t, ok := h.pages[page]
	if !ok {
		h.cfg.Logger.Error("ui: no template", "page", page)
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	l := &layout{Title: titles[page], Nav: page, Data: data, Refresh: int(h.cfg.Refresh.Milliseconds())}
	if n, ok := navOf[page]; ok {
		l.Nav = n
	}
	if e, ok := data.(*errorPage); ok {
		l.Title = e.Title
	}
	if s != nil {
		l.Signed, l.Admin, l.Tenant, l.CSRF = true, s.admin, s.tenant, s.csrf
		l.FlashKind, l.Flash = takeFlash(w, r)
	}
	h.write(w, status, t, "layout.html", l)
}

// fragment writes one named template without the layout (htmx swaps).
func (h *Handler) fragment(w http.ResponseWriter, page, name string, data any) {
	h.write(w, http.StatusOK, h.pages[page], name, data)
}

func (h *Handler) write(w http.ResponseWriter, status int, t *template.Template, name string, data any) {
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		h.cfg.Logger.Error("ui: render", "template", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// apiError renders an API failure as a page with its message.
func (h *Handler) apiError(w http.ResponseWriter, r *http.Request, s *session, what string, err error) {
	status := problemStatus(err)
	if status >= 500 {
		h.cfg.Logger.Error("ui: api call", "what", what, "err", err)
	}
	h.render(w, r, status, "error", s, &errorPage{Title: what, Message: problemText(err)})
}
