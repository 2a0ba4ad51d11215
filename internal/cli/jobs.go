package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// Environment of the HTTP client commands.
const (
	envURL     = "IDEM_URL"
	envAPIKey  = "IDEM_API_KEY"
	envTenant  = "IDEM_TENANT"
	defaultURL = "http://127.0.0.1:8080"
)

// apiFlags are the flags every HTTP client command shares.
type apiFlags struct {
	url, apiKey, tenant string
}

func (f *apiFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", "", "server URL (env "+envURL+", default "+defaultURL+")")
	pf.StringVar(&f.apiKey, "api-key", "", "API key (env "+envAPIKey+")")
	pf.StringVar(&f.tenant, "tenant", "", "act in this tenant (admin keys; env "+envTenant+")")
}

// client returns the client of the flags; a malformed --url (or IDEM_URL)
// or a --tenant (or IDEM_TENANT) no tenant can have is a usage error.
func (f *apiFlags) client() (*idemclient.Client, error) {
	tenant := orEnv(f.tenant, envTenant, "")
	if tenant != "" && idem.ValidateName("tenant", tenant) != nil {
		return nil, usageErr(fmt.Errorf("--tenant (or %s) %q: want 1 to 255 bytes of printable ASCII without spaces", envTenant, tenant))
	}
	cl, err := idemclient.New(orEnv(f.url, envURL, defaultURL), &idemclient.Config{
		APIKey: orEnv(f.apiKey, envAPIKey, ""), Tenant: tenant, UserAgent: "idem-cli"})
	if err != nil {
		return nil, usageErr(fmt.Errorf("--url (or %s): %w", envURL, err))
	}
	return cl, nil
}

// printJSON prints v as indented JSON, '<', '>' and '&' as they are (as
// the API writes them), not HTML-escaped.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("print json: %w", err)
	}
	return nil
}

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printJobs prints jobs as a table.
func printJobs(w io.Writer, jobs []*idemclient.Job, next string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tKIND\tSTATE\tATTEMPT\tCREATED\tKEY\tLAST ERROR")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", cell(j.ID, 0), cell(j.Queue, 0), cell(j.Kind, 0), cell(j.State, 0),
			j.Attempt, j.MaxAttempts, fmtTime(&j.CreatedAt), dash(cell(j.IdempotencyKey, 0)), dash(cell(j.LastError, 60)))
	}
	tw.Flush()
	if next != "" {
		fmt.Fprintf(w, "next page: --cursor %s\n", cell(next, 0))
	}
}

// printJob prints one job as key: value lines, each value cleaned of
// control characters (see lines).
func printJob(w io.Writer, j *idemclient.Job) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		// A value of several lines (an error with its stack) keeps to the
		// value column, so the key: value layout stays readable.
		ls := lines(strings.TrimRight(v, "\r\n"))
		fmt.Fprintf(tw, "%s:\t%s\n", k, ls[0])
		for _, l := range ls[1:] {
			fmt.Fprintf(tw, "\t%s\n", l)
		}
	}
	row("id", j.ID)
	row("tenant", j.Tenant)
	row("queue", j.Queue)
	row("kind", j.Kind)
	row("state", j.State)
	row("attempt", fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts))
	row("priority", fmt.Sprint(j.Priority))
	row("args", string(j.Args))
	row("run at", fmtTime(&j.RunAt))
	row("created", fmtTime(&j.CreatedAt))
	row("started", fmtTime(j.StartedAt))
	row("finished", fmtTime(j.FinishedAt))
	row("idempotency key", dash(j.IdempotencyKey))
	row("partition key", dash(j.PartitionKey))
	if len(j.DependsOn) > 0 {
		row("depends on", strings.Join(j.DependsOn, ", "))
	}
	if len(j.Result) > 0 {
		row("result", string(j.Result))
	}
	if j.WasCached {
		row("cached from", j.OriginalJobID)
	}
	row("last error", dash(j.LastError))
	if len(j.Metadata) > 0 {
		row("metadata", string(j.Metadata))
	}
	tw.Flush()
}

// listFlags are the filters of `jobs list` and `dlq list`.
type listFlags struct {
	states, queue, kind, partition, key string
	errorCode, resolved                 string
	limit                               int
	cursor                              string
}

func (l *listFlags) register(cmd *cobra.Command, withState bool) {
	fl := cmd.Flags()
	if withState {
		fl.StringVar(&l.states, "state", "", "states, comma-separated")
	}
	fl.StringVar(&l.queue, "queue", "", "queue")
	fl.StringVar(&l.kind, "kind", "", "kind")
	fl.StringVar(&l.partition, "partition-key", "", "partition key")
	fl.StringVar(&l.key, "key", "", "idempotency key")
	fl.StringVar(&l.errorCode, "error-code", "", "error code of the latest failure")
	fl.StringVar(&l.resolved, "resolved", "", "true or false: only resolved or unresolved dead jobs")
	fl.IntVar(&l.limit, "limit", 50, "page size (max 500)")
	fl.StringVar(&l.cursor, "cursor", "", "page cursor from a previous list")
}

func (l *listFlags) params() (*idemclient.ListParams, error) {
	if l.limit < 1 {
		// 0 would be sent as no value: the server's page size.
		return nil, usageErr(fmt.Errorf("--limit %d: want a positive number", l.limit))
	}
	p := &idemclient.ListParams{Filter: idemclient.Filter{Queue: l.queue, Kind: l.kind, PartitionKey: l.partition,
		IdempotencyKey: l.key}, Limit: l.limit, Cursor: l.cursor}
	if l.states != "" {
		p.States = splitList(l.states)
	}
	p.ErrorCode = l.errorCode
	if l.resolved != "" {
		b, err := strconv.ParseBool(l.resolved)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--resolved %q: want true or false", l.resolved))
		}
		p.Resolved = &b
	}
	return p, nil
}

// newListCmd is the `list` subcommand of jobs and dlq: it fetches one page
// with the list flags (--state only when withState) and prints it.
func newListCmd(af *apiFlags, short string, withState bool,
	fetch func(*idemclient.Client, context.Context, *idemclient.ListParams) (*idemclient.JobPage, error)) *cobra.Command {
	var lf listFlags
	list := &cobra.Command{Use: "list", Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := lf.params()
			if err != nil {
				return err
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			page, err := fetch(cl, cmd.Context(), p)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), page)
			}
			printJobs(cmd.OutOrStdout(), page.Jobs, page.NextCursor)
			return nil
		}}
	lf.register(list, withState)
	registerListCompletions(list, af)
	return list
}

func newJobsCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "jobs", Short: "List, inspect, cancel and retry jobs over the HTTP API"}
	af.register(cmd)
	list := newListCmd(&af, "List jobs, newest first", true, (*idemclient.Client).ListJobs)
	oneJob := func(use, short string, fn func(cmd *cobra.Command, cl *idemclient.Client, id string) (*idemclient.Job, error)) *cobra.Command {
		return &cobra.Command{Use: use + " ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, err := af.client()
				if err != nil {
					return err
				}
				j, err := fn(cmd, cl, args[0])
				if err != nil {
					return err
				}
				if wantJSON(cmd) {
					return printJSON(cmd.OutOrStdout(), j)
				}
				printJob(cmd.OutOrStdout(), j)
				return nil
			}}
	}
	get := oneJob("get", "Show a job", func(cmd *cobra.Command, cl *idemclient.Client, id string) (*idemclient.Job, error) {
		return cl.GetJob(cmd.Context(), id)
	})
	cancel := oneJob("cancel", "Cancel a job", func(cmd *cobra.Command, cl *idemclient.Client, id string) (*idemclient.Job, error) {
		return cl.CancelJob(cmd.Context(), id)
	})
	var runAt string
	retry := oneJob("retry", "Retry a dead or cancelled job", func(cmd *cobra.Command, cl *idemclient.Client, id string) (*idemclient.Job, error) {
		var at time.Time
		if runAt != "" {
			var err error
			if at, err = time.Parse(time.RFC3339, runAt); err != nil {
				return nil, usageErr(fmt.Errorf("--run-at: want an RFC 3339 time: %w", err))
			}
		}
		return cl.RetryJob(cmd.Context(), id, at)
	})
	retry.Flags().StringVar(&runAt, "run-at", "", "run at this RFC 3339 time (default now)")
	attempts := &cobra.Command{Use: "attempts ID", Short: "List the attempts of a job", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			atts, err := cl.Attempts(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]any{"attempts": atts})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ATTEMPT\tSTARTED\tDURATION\tOUTCOME\tWORKER\tTARGET\tSTATUS\tERROR")
			for _, a := range atts {
				status := "-"
				if a.HTTPStatus != 0 {
					status = strconv.Itoa(a.HTTPStatus)
				}
				fmt.Fprintf(tw, "%d\t%s\t%dms\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, fmtTime(&a.StartedAt), a.DurationMS, cell(a.Outcome, 0),
					dash(cell(a.Worker, 0)), dash(cell(a.Target, 0)), status, dash(cell(a.Error, 80)))
			}
			return tw.Flush()
		}}
	cmd.AddCommand(list, get, cancel, retry, attempts)
	return cmd
}
