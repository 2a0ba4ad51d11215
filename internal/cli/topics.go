package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// maxEventsLimit is the largest page of GET /v1/topics/{topic}/events.
const maxEventsLimit = 500

// newTopicsCmd publishes events and manages subscriptions, the event log
// and replays over the HTTP API.
func newTopicsCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "topics", Short: "Publish events, manage subscriptions, read and replay the event log"}
	af.register(cmd)
	cmd.AddCommand(newSubscribeCmd(&af), newUnsubscribeCmd(&af), newSubscriptionsCmd(&af), newPublishCmd(&af),
		newEventsCmd(&af), newEventReplayCmd(&af))
	return cmd
}

func newSubscribeCmd(af *apiFlags) *cobra.Command {
	var req idemclient.SubscriptionPut
	var secret, timeout string
	var unsigned bool
	c := &cobra.Command{Use: "subscribe TOPIC NAME", Short: "Create or replace a subscription (a generated secret is printed once)",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("max-attempts") && req.MaxAttempts < 1 {
				// 0 would be sent as no value: the server's default.
				return usageErr(fmt.Errorf("--max-attempts %d: invalid max_attempts: want 1 to %d", req.MaxAttempts, idem.MaxMaxAttempts))
			}
			if unsigned && secret != "" {
				// --secret would be sent and --unsigned dropped.
				return usageErr(errors.New("--unsigned and --secret contradict each other"))
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			r := req
			if secret != "" || unsigned {
				r.Secret = &secret
			}
			if timeout != "" {
				r.Timeout = &timeout
			}
			s, created, err := cl.PutSubscription(cmd.Context(), args[0], args[1], &r)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), s)
			}
			verb := map[bool]string{true: "created", false: "replaced"}[created]
			fmt.Fprintf(cmd.OutOrStdout(), "%s subscription %s/%s\n", verb, cell(s.Topic, 0), cell(s.Name, 0))
			if s.Secret != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "signing secret (shown only once): %s\n", cell(s.Secret, 0))
			}
			return nil
		}}
	fl := c.Flags()
	fl.StringVar(&req.URL, "target-url", "", "webhook URL, or nats://host:port/subject (required)")
	fl.StringSliceVar(&req.Kinds, "type", nil, "only events of these types (repeatable)")
	fl.IntVar(&req.MaxAttempts, "max-attempts", 0, "attempts of each delivery, 1 to 1000 (default: the server's)")
	fl.StringVar(&secret, "secret", "", "signing secret whsec_… (default: generated for a new subscription, kept for an existing one)")
	fl.BoolVar(&unsigned, "unsigned", false, "send pushes without a signature")
	fl.StringVar(&timeout, "timeout", "", "timeout of one push, e.g. 10s")
	_ = c.MarkFlagRequired("target-url")
	return c
}

func newUnsubscribeCmd(af *apiFlags) *cobra.Command {
	return &cobra.Command{Use: "unsubscribe TOPIC NAME", Short: "Delete a subscription", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			if err := cl.DeleteSubscription(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]any{"deleted": true, "topic": args[0], "subscription": args[1]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted subscription %s/%s\n", args[0], args[1])
			return nil
		}}
}

func newSubscriptionsCmd(af *apiFlags) *cobra.Command {
	return &cobra.Command{Use: "subscriptions TOPIC", Short: "List the subscriptions of a topic", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			subs, err := cl.Subscriptions(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), subs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tURL\tTYPES\tATTEMPTS\tSECRETS")
			for _, s := range subs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", cell(s.Name, 0), cell(s.URL, 0), dash(cell(strings.Join(s.Kinds, ","), 0)), s.MaxAttempts, s.SecretCount)
			}
			return tw.Flush()
		}}
}

func newPublishCmd(af *apiFlags) *cobra.Command {
	var req idemclient.PublishRequest
	var payload, metadata string
	c := &cobra.Command{Use: "publish TOPIC", Short: "Publish an event", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			r := req
			if !json.Valid([]byte(payload)) {
				return usageErr(errors.New("--payload: not valid JSON"))
			}
			r.Payload = json.RawMessage(payload)
			if metadata != "" {
				if !json.Valid([]byte(metadata)) {
					return usageErr(errors.New("--metadata: not valid JSON"))
				}
				r.Metadata = json.RawMessage(metadata)
			}
			res, err := cl.Publish(cmd.Context(), args[0], &r)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "event %s: %d deliveries (existing: %v)\n", cell(res.EventID, 0), res.Deliveries, res.Existing)
			return nil
		}}
	fl := c.Flags()
	fl.StringVar(&req.Key, "key", "", "deduplication key")
	fl.StringVar(&req.Type, "type", "", "event type")
	fl.StringVar(&req.PartitionKey, "partition-key", "", "the entity (order per entity)")
	fl.StringVar(&payload, "payload", "{}", "payload JSON")
	fl.StringVar(&metadata, "metadata", "", "metadata JSON object")
	return c
}

func newEventsCmd(af *apiFlags) *cobra.Command {
	var partition, cursor string
	var types []string
	var limit int
	c := &cobra.Command{Use: "events TOPIC", Short: "List the event log of a topic, oldest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > maxEventsLimit {
				// 0 or less would be sent as no value: the server's page size.
				return usageErr(fmt.Errorf("--limit %d: invalid limit: want 1 to %d", limit, maxEventsLimit))
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			evs, next, err := cl.Events(cmd.Context(), args[0], partition, types, limit, cursor)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]any{"events": evs, "next_cursor": next})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTYPE\tENTITY\tKEY\tDELIVERIES\tCREATED")
			for _, e := range evs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", cell(e.ID, 0), dash(cell(e.Type, 0)), dash(cell(e.PartitionKey, 0)), dash(cell(e.Key, 0)), e.Deliveries, fmtTime(&e.CreatedAt))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "next page: --cursor %s\n", cell(next, 0))
			}
			return nil
		}}
	fl := c.Flags()
	fl.StringVar(&partition, "partition-key", "", "only this entity")
	fl.StringSliceVar(&types, "type", nil, "only these types")
	fl.IntVar(&limit, "limit", 50, "page size, 1 to 500")
	fl.StringVar(&cursor, "cursor", "", "next page")
	return c
}

func newEventReplayCmd(af *apiFlags) *cobra.Command {
	var req idemclient.EventReplayRequest
	var metas []string
	var from, to string
	c := &cobra.Command{Use: "replay TOPIC", Short: "Deliver events of the log again (new deliveries naming the originals)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(metas) > 1 {
				// A repeated flag kept its last value only: the replay
				// then selected the events of that one pair.
				return usageErr(fmt.Errorf("--metadata given %d times: a replay selects by one key=value", len(metas)))
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			r := req
			if len(metas) == 1 {
				k, v, ok := strings.Cut(metas[0], "=")
				if !ok {
					return usageErr(errors.New("--metadata: want key=value"))
				}
				r.Metadata = map[string]string{k: v}
			}
			if from != "" {
				r.From = &from
			}
			if to != "" {
				r.To = &to
			}
			res, err := cl.ReplayEvents(cmd.Context(), args[0], &r)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replayed %d events: %d deliveries\n", res.Events, res.Deliveries)
			return nil
		}}
	fl := c.Flags()
	fl.StringVar(&req.PartitionKey, "partition-key", "", "only this entity")
	fl.StringSliceVar(&req.Types, "type", nil, "only these types")
	fl.StringArrayVar(&metas, "metadata", nil, "only events whose metadata has key=value (one pair)")
	fl.StringVar(&from, "from", "", "created at or after (RFC 3339)")
	fl.StringVar(&to, "to", "", "created before (RFC 3339)")
	fl.StringVar(&req.Subscription, "subscription", "", "only to this subscription")
	return c
}
