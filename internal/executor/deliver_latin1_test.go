package executor_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/webhook"
)

// TestDeliveryLatin1ErrorBody: a receiver on 127.0.0.1 answers 400 with a
// Latin-1 body of more than MaxErrorExcerpt bytes. The dead attempt's
// error quotes the body's start, the text after its first non-ASCII byte
// included (each byte that is not UTF-8 written as \xNN), and stays valid
// UTF-8. Before the fix the quote stopped just before that first byte:
// "Fehler: Ung…".
func TestDeliveryLatin1ErrorBody(t *testing.T) {
	t.Parallel()
	body := "Fehler: Ung\xfcltige Anfrage, Feld 'Stra\xdfe' fehlt. " + strings.Repeat("Gr\xfc\xdfe ", 100)
	b := setupDelivery(t, answers(map[string]answer{"latin1": {400, nil, body}}), &webhook.Config{}, nil)
	fin := b.exec.Execute(context.Background(), b.claim(t, "latin1", ""), nil)
	if fin.State != idemtype.StateDead || fin.HTTPStatus != 400 {
		t.Fatalf("state %s status %d, want dead 400 (error %q)", fin.State, fin.HTTPStatus, fin.Error)
	}
	for _, s := range []string{`Ung\xfcltige Anfrage, Feld 'Stra\xdfe' fehlt.`, `Gr\xfc\xdfe`, "…"} {
		if !strings.Contains(fin.Error, s) {
			t.Errorf("error %q lacks %q", fin.Error, s)
		}
	}
	if !utf8.ValidString(fin.Error) {
		t.Errorf("error is not valid UTF-8: %q", fin.Error)
	}
	b.finish(t, fin)
}
