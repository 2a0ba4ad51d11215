package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
)

// envDeliverQueues lists, comma-separated, the queues `idem serve` delivers
// to webhook targets.
const envDeliverQueues = "IDEM_DELIVER_QUEUES"

// deliveryFlags are the delivery inputs of `idem serve`.
type deliveryFlags struct {
	queues   []string
	workers  int
	noTopics bool
}

// register adds the delivery flags to serve.
func (d *deliveryFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&d.queues, "deliver", nil, "push the jobs of this queue to its webhook targets (repeatable; env "+envDeliverQueues+", comma-separated)")
	fl.IntVar(&d.workers, "deliver-workers", idem.DefaultMaxWorkers*5, "concurrent deliveries per delivered queue in this process")
	fl.BoolVar(&d.noTopics, "no-topic-delivery", false, "do not deliver the events of topics (queue "+idem.DefaultTopicQueue+") from this process")
}

// config returns the client configuration of the delivered queues: those
// named and, unless disabled, the topic queue; nil when there are none.
func (d *deliveryFlags) config() (map[string]idem.QueueConfig, error) {
	names, source := d.queues, "--deliver"
	if len(names) == 0 && os.Getenv(envDeliverQueues) != "" {
		names, source = splitList(os.Getenv(envDeliverQueues)), envDeliverQueues
	}
	if !d.noTopics {
		names = append(names, idem.DefaultTopicQueue)
	}
	if len(names) == 0 {
		return nil, nil
	}
	if d.workers < 1 {
		return nil, fmt.Errorf("--deliver-workers must be at least 1")
	}
	out := make(map[string]idem.QueueConfig, len(names))
	for _, n := range names {
		n = strings.TrimSpace(n)
		if err := idem.ValidateName("queue", n); err != nil {
			return nil, fmt.Errorf("%s %q: %w", source, n, err)
		}
		out[n] = idem.QueueConfig{MaxWorkers: d.workers, Deliver: true}
	}
	return out, nil
}
