package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

// benchHTTPFlags are the inputs of `idem bench-http`.
type benchHTTPFlags struct {
	url, apiKey, db string
	requests, conc  int
	keys            int
	modes           []string
	profile         string
}

func newBenchHTTPCmd() *cobra.Command {
	var f benchHTTPFlags
	cmd := &cobra.Command{
		Use:   "bench-http",
		Short: "Load-test POST /v1/jobs with Idempotency-Keys over loopback HTTP",
		Long: `Sends --requests enqueues from --concurrency keep-alive connections and reports
req/s and p50/p99 latency, for two workloads:
  new:    every request has a fresh Idempotency-Key (each creates a job, 201);
  repeat: requests cycle over --keys keys (after the first round, each is a
          replay answered with the existing job, 200 + Idempotent-Replayed).
Without --url it starts an in-process server on 127.0.0.1 with a temp SQLite
file (or --database), which shares the CPU with the load generator.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchHTTP(cmd.Context(), cmd.OutOrStdout(), &f, wantJSON(cmd))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "server to load (default: an in-process server)")
	fl.StringVar(&f.apiKey, "api-key", "", "API key for --url (env "+envAPIKey+")")
	fl.StringVar(&f.db, "database", "", "database of the in-process server (default: a temp SQLite file)")
	fl.IntVar(&f.requests, "requests", 50000, "requests per workload")
	fl.IntVar(&f.conc, "concurrency", 64, "concurrent connections")
	fl.IntVar(&f.keys, "keys", 100, "distinct keys of the repeat workload")
	fl.StringSliceVar(&f.modes, "mode", []string{"new", "repeat"}, "workloads: new, repeat")
	fl.StringVar(&f.profile, "profile", "", "write a CPU profile of each workload (server and load generator together) into this directory")
	return cmd
}

func runBenchHTTP(ctx context.Context, w io.Writer, f *benchHTTPFlags, asJSON bool) error {
	base, key := f.url, orEnv(f.apiKey, envAPIKey, "")
	if base == "" {
		url, secret, stop, err := startBenchServer(ctx, f.db)
		if err != nil {
			return err
		}
		defer stop()
		base, key = url, secret
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: f.conc * 2, MaxIdleConnsPerHost: f.conc * 2,
		IdleConnTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	if !asJSON {
		fmt.Fprintf(w, "idem bench-http  url=%s  requests=%d  concurrency=%d\n", base, f.requests, f.conc)
	}
	var rows []map[string]any
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, mode := range f.modes {
		var gen func(i int) (key string, body []byte)
		switch mode {
		case "new":
			gen = func(i int) (string, []byte) {
				return "new-" + run + "-" + strconv.Itoa(i), []byte(`{"kind":"bench","queue":"bench","args":{"i":` + strconv.Itoa(i) + `}}`)
			}
		case "repeat":
			gen = func(i int) (string, []byte) {
				k := i % max(f.keys, 1)
				return "rep-" + run + "-" + strconv.Itoa(k), []byte(`{"kind":"bench","queue":"bench","args":{"k":` + strconv.Itoa(k) + `}}`)
			}
		default:
			return fmt.Errorf("unknown mode %q (want new or repeat)", mode)
		}
		var res *loadResult
		err := profiled(f.profile, "http-"+mode, func() (err error) {
			res, err = loadHTTP(ctx, hc, base+"/v1/jobs", key, f.requests, f.conc, gen)
			return err
		})
		if err != nil {
			return err
		}
		if asJSON {
			rows = append(rows, map[string]any{"mode": mode, "requests_per_second": res.rps, "p50_ms": ms(res.p50),
				"p99_ms": ms(res.p99), "max_ms": ms(res.max), "statuses": res.statuses})
			continue
		}
		fmt.Fprintf(w, "%-7s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms  statuses %v\n", mode, res.rps,
			ms(res.p50), ms(res.p99), ms(res.max), res.statuses)
	}
	if asJSON {
		return printJSON(w, map[string]any{"requests": f.requests, "concurrency": f.conc, "results": rows})
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type loadResult struct {
	rps           float64
	p50, p99, max time.Duration
	statuses      map[int]int
}

// loadHTTP sends n POSTs from conc goroutines and measures them.
func loadHTTP(ctx context.Context, hc *http.Client, url, apiKey string, n, conc int, gen func(int) (string, []byte)) (*loadResult, error) {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	statuses := make([]int, n)
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				key, body := gen(i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+apiKey)
				req.Header.Set("Idempotency-Key", key)
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i], statuses[i] = time.Since(t0), resp.StatusCode
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, fmt.Errorf("bench-http: %w", firstErr)
	}
	res := &loadResult{rps: float64(n) / elapsed.Seconds(), statuses: map[int]int{}}
	for _, s := range statuses {
		res.statuses[s]++
	}
	slices.Sort(lat)
	res.p50, res.p99, res.max = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	return res, nil
}

// startBenchServer runs an in-process server on loopback for the benchmark.
func startBenchServer(ctx context.Context, db string) (url, secret string, stop func(), err error) {
	var cleanup []func()
	stop = func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	// The database of `idem bench`: a temp SQLite file, or a fresh
	// PostgreSQL schema dropped at the end (see openBenchDB).
	bdb, dbURL, err := openBenchDB(ctx, db, "", false)
	if err != nil {
		return "", "", nil, err
	}
	cleanup = append(cleanup, func() { _ = bdb.close(context.WithoutCancel(ctx), dbURL) })
	st := bdb.st
	// Warnings only: an access log line per request (info) would make the
	// benchmark measure stderr.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: logger})
	if err != nil {
		stop()
		return "", "", nil, err
	}
	if err := refuseUsed(ctx, client, bdb, dbURL); err != nil {
		stop()
		return "", "", nil, err
	}
	server, err := idemhttp.NewServer(client, st, &idemhttp.Config{Logger: logger})
	if err != nil {
		stop()
		return "", "", nil, err
	}
	secret, k := idemhttp.NewAPIKey(idem.DefaultTenant, true, "bench", time.Now())
	if err := st.APIKeyCreate(ctx, k); err != nil {
		stop()
		return "", "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return "", "", nil, err
	}
	srv := &http.Server{Handler: server}
	go srv.Serve(ln)
	cleanup = append(cleanup, func() { srv.Close() })
	return "http://" + ln.Addr().String(), secret, stop, nil
}
