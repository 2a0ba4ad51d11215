package idemhttp

import (
	"crypto/rand"
	"net/http"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/internal/redact"
	"github.com/idem-dev/idem/webhook"
)

// pathName returns the {name} path value, validated.
func pathName(r *http.Request) (string, error) {
	n := r.PathValue("name")
	if err := idem.ValidateName("name", n); err != nil {
		return "", err
	}
	return n, nil
}

// putTarget creates or replaces a delivery target: 201 when created, 200
// when replaced. Without secrets, a secret is generated when the put
// creates the target (in that reply, once) and the stored ones are kept
// when it replaces it, so a repeated PUT never rotates them; given
// secrets replace them and are never returned.
func (s *Server) putTarget(w http.ResponseWriter, r *http.Request) error {
	name, err := pathName(r)
	if err != nil {
		return err
	}
	var req wire.TargetPut
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	timeout, err := parseDuration("timeout", req.Timeout)
	if err != nil {
		return err
	}
	t := &idem.Target{Tenant: tenantOf(r), Name: name, URL: req.URL, Queue: req.Queue, Kind: req.Kind}
	if timeout != nil {
		t.Timeout = *timeout
	}
	generated, err := targetSecrets(t, req.Secrets)
	if err != nil {
		return err
	}
	created, err := s.client.TargetPut(r.Context(), t)
	if err != nil {
		return err
	}
	got, err := s.client.TargetGet(r.Context(), t.Tenant, name)
	if err != nil {
		return err
	}
	out := renderTarget(got)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	if created && !generated.IsZero() {
		out.Secret = generated.Reveal()
	}
	writeJSON(w, status, out)
	return nil
}

// targetSecrets parses the given secrets into t, or, when none were
// given, generates one for a target the put creates and keeps the stored
// ones of a target it replaces; it returns the generated one.
func targetSecrets(t *idem.Target, in *[]string) (webhook.Secret, error) {
	if in == nil {
		sec := newSecret()
		t.Secrets, t.KeepSecrets = []webhook.Secret{sec}, true
		return sec, nil
	}
	for _, raw := range *in {
		sec, err := webhook.ParseSecret(raw)
		if err != nil {
			return webhook.Secret{}, invalid("secrets", "want whsec_ followed by base64")
		}
		t.Secrets = append(t.Secrets, sec)
	}
	return webhook.Secret{}, nil
}

// newSecret is a new random signing secret.
func newSecret() webhook.Secret {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand does not fail on supported platforms
	return webhook.NewSecret(key)
}

func (s *Server) listTargets(w http.ResponseWriter, r *http.Request) error {
	list, err := s.client.TargetList(r.Context(), tenantOf(r))
	if err != nil {
		return err
	}
	out := wire.TargetList{Targets: make([]*wire.Target, 0, len(list))}
	for _, t := range list {
		out.Targets = append(out.Targets, renderTarget(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getTarget(w http.ResponseWriter, r *http.Request) error {
	name, err := pathName(r)
	if err != nil {
		return err
	}
	t, err := s.client.TargetGet(r.Context(), tenantOf(r), name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderTarget(t))
	return nil
}

func (s *Server) deleteTarget(w http.ResponseWriter, r *http.Request) error {
	name, err := pathName(r)
	if err != nil {
		return err
	}
	if err := s.client.TargetDelete(r.Context(), tenantOf(r), name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// renderTarget converts a target, without secrets: a password or NATS
// token in its URL is masked.
func renderTarget(t *idem.Target) *wire.Target {
	out := &wire.Target{Name: t.Name, URL: redact.URL(t.URL), Queue: t.Queue, Kind: t.Kind, SecretCount: t.SecretCount,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if t.Timeout > 0 {
		out.Timeout = t.Timeout.String()
	}
	return out
}
