package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemclient"
)

// newSchedulesCmd is `idem schedules list|put|delete|trigger`, over the HTTP API.
func newSchedulesCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "schedules", Short: "Manage schedules (jobs on a timetable) over the HTTP API"}
	af.register(cmd)
	cmd.AddCommand(newSchedulesListCmd(&af), newSchedulesPutCmd(&af), newSchedulesDeleteCmd(&af), newSchedulesTriggerCmd(&af))
	return cmd
}

func newSchedulesListCmd(af *apiFlags) *cobra.Command {
	return &cobra.Command{Use: "list", Short: "List schedules with their last and next firings and the last run's state", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			list, err := cl.ListSchedules(cmd.Context())
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tWHEN\tZONE\tKIND\tMISSED\tLAST FIRED\tNEXT\tLAST JOB\tSTATE")
			for _, s := range list {
				when := s.Cron
				if when == "" {
					when = "every " + s.Every
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(s.Name, 0), cell(when, 0), cell(s.Timezone, 0),
					cell(s.Kind, 0), cell(s.Missed, 0), fmtTime(s.LastFiredAt), fmtTime(s.NextFireAt), dash(cell(s.LastJobID, 0)),
					dash(cell(s.LastJobState, 0)))
			}
			return tw.Flush()
		}}
}

func newSchedulesPutCmd(af *apiFlags) *cobra.Command {
	var req idemclient.ScheduleRequest
	var every, dedup, ttl, timeout, args, retry string
	put := &cobra.Command{Use: "put NAME", Short: "Create or replace a schedule (--cron or --every, --kind)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			for _, d := range []struct {
				v   string
				dst **string
			}{{every, &req.Every}, {dedup, &req.DedupWindow}, {ttl, &req.ResultTTL}, {timeout, &req.Timeout}} {
				if d.v != "" {
					*d.dst = &d.v
				}
			}
			if args != "" {
				if !json.Valid([]byte(args)) {
					return usageErr(errors.New("--args: not valid JSON"))
				}
				req.Args = json.RawMessage(args)
			}
			if retry != "" {
				spec, err := retryFlag(retry)
				if err != nil {
					return err
				}
				req.Retry = spec
			}
			s, err := cl.PutSchedule(cmd.Context(), a[0], &req)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s: next firing %s\n", s.Name, fmtTime(s.NextFireAt))
			return nil
		}}
	f := put.Flags()
	f.StringVar(&req.Cron, "cron", "", "cron expression (5 fields, or 6 with seconds first)")
	f.StringVar(&every, "every", "", "fixed interval instead of --cron (at least 1m)")
	f.StringVar(&req.Timezone, "timezone", "", "IANA time zone (default UTC)")
	f.StringVar(&req.Grain, "grain", "", "firing key grain: minute (default), hour or day")
	f.StringVar(&req.Missed, "missed", "", "missed firings: skip (default) or catch_up")
	f.StringVar(&req.Kind, "kind", "", "job kind (required)")
	f.StringVar(&args, "args", "", "job args (JSON)")
	f.StringVar(&req.Queue, "queue", "", "job queue")
	f.IntVar(&req.Priority, "priority", 0, "job priority")
	f.IntVar(&req.MaxAttempts, "max-attempts", 0, "job max attempts")
	f.StringVar(&dedup, "dedup-window", "", "how long a firing key blocks (at least 1h)")
	f.StringVar(&ttl, "result-ttl", "", "how long a result is cached")
	f.StringVar(&timeout, "timeout", "", "limit of one attempt of each firing's job (e.g. 30s)")
	f.StringVar(&retry, "retry", "", `each firing's retry policy as JSON, e.g. '{"delays":["1s","5s","25s"]}' (max_attempts, base, factor, max, jitter, delays)`)
	return put
}

func newSchedulesDeleteCmd(af *apiFlags) *cobra.Command {
	return &cobra.Command{Use: "delete NAME", Short: "Delete a schedule (never the jobs it made)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			if err := cl.DeleteSchedule(cmd.Context(), a[0]); err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]string{"deleted": a[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted schedule %s\n", a[0])
			return nil
		}}
}

func newSchedulesTriggerCmd(af *apiFlags) *cobra.Command {
	var key string
	trig := &cobra.Command{Use: "trigger NAME", Short: "Fire a schedule now (a firing of its own)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			res, err := cl.TriggerSchedule(cmd.Context(), a[0], key)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), res.EnqueueReply)
			}
			verb := "enqueued"
			if res.Existing {
				verb = "existing"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s job %s\n", verb, res.Job.ID)
			return nil
		}}
	trig.Flags().StringVar(&key, "key", "", "trigger key: triggers with the same key make one job")
	return trig
}
