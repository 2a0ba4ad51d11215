package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idem-dev/idem/webhook"
)

// A sender signs; a receiver verifies, here a second after the push.
func Example() {
	secret, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		panic(err)
	}
	sent := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	h := http.Header{}
	signer.SetHeaders(h, "msg_p5jXN8AQM9LWM0D4loKWxJek", sent, body)
	fmt.Println(h.Get(webhook.HeaderSignature))
	fmt.Println(secret)

	err = webhook.Verify([]webhook.Secret{secret}, h, body, sent.Add(time.Second), 0)
	fmt.Println("verified:", err == nil)
	err = webhook.Verify([]webhook.Secret{secret}, h, body, sent.Add(time.Hour), 0)
	fmt.Println("an hour later:", errors.Is(err, webhook.ErrTimestampTooOld))
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// whsec_********
	// verified: true
	// an hour later: true
}
