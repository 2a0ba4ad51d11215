package producer

import "github.com/idem-dev/idem/idemtype"

// SetKeptHook makes p call f with each job whose outcome it keeps, just
// before the finish goes to the completer; call it before Start. Tests
// use it to run a shutdown step at that exact point.
func SetKeptHook(p *Producer, f func(row *idemtype.JobRow)) { p.kept = f }
