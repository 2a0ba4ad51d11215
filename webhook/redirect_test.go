package webhook

import (
	"net/http"
	"testing"
)

// TestSenderFollowedRedirectLeadingNowhere: with FollowRedirects, a 307
// that cannot be followed — to a scheme other than http(s), or one more of
// a chain longer than ten — is dead with its 3xx status, as a 3xx that is
// not followed is: before the fix both were a transport error of class
// retry, so a receiver's misconfigured redirect was pushed again on every
// attempt of the job.
func TestSenderFollowedRedirectLeadingNowhere(t *testing.T) {
	t.Parallel()
	for name, location := range map[string]string{
		"to another scheme": "ftp://127.0.0.1/hooks",
		"in a loop":         "/again",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &Config{FollowRedirects: true})
			srv := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", location)
				w.WriteHeader(http.StatusTemporaryRedirect)
			})
			wantClass(t, b.push(t, srv.URL), ClassDead, http.StatusTemporaryRedirect)
		})
	}
}
