package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
	client          string
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
It also prints the CPU time this process used per request: the server's
and the load generator's together without --url, the load generator's
alone with it.
Every response is checked: a 201 or 200 must be application/json holding
the job its Location header names; any other status must be a problem.
With --client raw (the default) each worker writes HTTP/1.1 requests on
its own keep-alive connection and parses the replies itself, reusing its
buffers, so that the load generator takes less of the CPU it shares with
an in-process server; --client std uses net/http's client instead.
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
	fl.StringVar(&f.client, "client", "raw", "load generator: raw (one keep-alive HTTP/1.1 connection per worker, buffers reused) or std (net/http's client)")
	fl.StringVar(&f.profile, "profile", "", "write a CPU profile of each workload (server and load generator together) into this directory")
	return cmd
}

func runBenchHTTP(ctx context.Context, w io.Writer, f *benchHTTPFlags, asJSON bool) error {
	base, key := f.url, orEnv(f.apiKey, envAPIKey, "")
	if f.client != "raw" && f.client != "std" {
		return fmt.Errorf("unknown --client %q (want raw or std)", f.client)
	}
	if base == "" {
		url, secret, stop, err := startBenchServer(ctx, f.db)
		if err != nil {
			return err
		}
		defer stop()
		base, key = url, secret
	}
	if !asJSON {
		fmt.Fprintf(w, "idem bench-http  url=%s  requests=%d  concurrency=%d  client=%s\n", base, f.requests, f.conc, f.client)
	}
	var rows []map[string]any
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, mode := range f.modes {
		var gen benchRequestGen
		switch mode {
		case "new":
			gen = func(k, b []byte, i int) ([]byte, []byte) {
				k = strconv.AppendInt(append(append(k, "new-"...), run+"-"...), int64(i), 10)
				b = strconv.AppendInt(append(b, `{"kind":"bench","queue":"bench","args":{"i":`...), int64(i), 10)
				return k, append(b, "}}"...)
			}
		case "repeat":
			gen = func(k, b []byte, i int) ([]byte, []byte) {
				n := int64(i % max(f.keys, 1))
				k = strconv.AppendInt(append(append(k, "rep-"...), run+"-"...), n, 10)
				b = strconv.AppendInt(append(b, `{"kind":"bench","queue":"bench","args":{"k":`...), n, 10)
				return k, append(b, "}}"...)
			}
		default:
			return fmt.Errorf("unknown mode %q (want new or repeat)", mode)
		}
		var res *loadResult
		err := profiled(f.profile, "http-"+mode, func() (err error) {
			res, err = loadHTTP(ctx, f.client, base, key, f.requests, f.conc, gen)
			return err
		})
		if err != nil {
			return err
		}
		if asJSON {
			rows = append(rows, map[string]any{"mode": mode, "requests_per_second": res.rps, "p50_ms": ms(res.p50),
				"p99_ms": ms(res.p99), "max_ms": ms(res.max), "statuses": res.statuses, "cpu_us_per_request": us(res.cpu)})
			continue
		}
		fmt.Fprintf(w, "%-7s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms  cpu %5.0f µs/req  statuses %v\n", mode,
			res.rps, ms(res.p50), ms(res.p99), ms(res.max), us(res.cpu), res.statuses)
	}
	if asJSON {
		return printJSON(w, map[string]any{"requests": f.requests, "concurrency": f.conc, "client": f.client, "results": rows})
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

type loadResult struct {
	rps           float64
	p50, p99, max time.Duration
	// cpu is this process's CPU time (user + system) per request: the
	// server's and the load generator's without --url, the load
	// generator's alone with it.
	cpu      time.Duration
	statuses map[int]int
}

// benchRequestGen appends the Idempotency-Key and the JSON body of request
// i to k and b.
type benchRequestGen func(k, b []byte, i int) (key, body []byte)

// loadHTTP sends n POSTs to base+"/v1/jobs" from conc connections and
// measures them; every response is checked (see checkEnqueueReply).
func loadHTTP(ctx context.Context, client, base, apiKey string, n, conc int, gen benchRequestGen) (*loadResult, error) {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	statuses := make([]int, n)
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	var std *http.Client
	if client == "std" {
		std = &http.Client{Transport: &http.Transport{MaxIdleConns: conc * 2, MaxIdleConnsPerHost: conc * 2,
			IdleConnTimeout: time.Minute}}
		defer std.CloseIdleConnections()
	}
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), processCPU()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var send func(key, body []byte) (benchReply, error)
			if std != nil {
				send = stdSender(ctx, std, base+"/v1/jobs", apiKey)
			} else {
				rc, err := dialBench(ctx, base, apiKey)
				if err != nil {
					fail(err)
					return
				}
				defer rc.close()
				send = func(key, body []byte) (benchReply, error) { return rc.send(ctx, key, body) }
			}
			var kb, bb []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				kb, bb = gen(kb[:0], bb[:0], i)
				t0 := time.Now()
				rep, err := send(kb, bb)
				if err == nil {
					err = checkEnqueueReply(rep)
				}
				if err != nil {
					fail(fmt.Errorf("request %d: %w", i, err))
					return
				}
				lat[i], statuses[i] = time.Since(t0), rep.status
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return nil, fmt.Errorf("bench-http: %w", firstErr)
	}
	res := &loadResult{rps: float64(n) / elapsed.Seconds(), cpu: cpu / time.Duration(n), statuses: map[int]int{}}
	for _, s := range statuses {
		res.statuses[s]++
	}
	slices.Sort(lat)
	res.p50, res.p99, res.max = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	return res, nil
}

// benchReply is what a check needs of one response. Its slices are valid
// until the next request on the same connection.
type benchReply struct {
	status      int
	contentType []byte
	location    []byte
	body        []byte
}

// checkEnqueueReply accepts a 201 or 200 whose JSON body is the job the
// Location header names, and a problem (any other status, counted by the
// caller) as application/problem+json.
func checkEnqueueReply(r benchReply) error {
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		if !bytes.HasPrefix(r.contentType, []byte("application/problem+json")) || len(r.body) == 0 {
			return fmt.Errorf("status %d with %q: %.200s", r.status, r.contentType, r.body)
		}
		return nil
	}
	id, ok := bytes.CutPrefix(r.location, []byte("/v1/jobs/"))
	if !ok || len(id) == 0 || !bytes.HasPrefix(r.contentType, []byte("application/json")) {
		return fmt.Errorf("status %d with %q, Location %q", r.status, r.contentType, r.location)
	}
	var want [64]byte
	if len(id) > 40 || !bytes.Contains(r.body, append(append(append(want[:0], `"id":"`...), id...), '"')) ||
		!json.Valid(r.body) {
		return fmt.Errorf("status %d: the body is not job %s: %.200s", r.status, id, r.body)
	}
	return nil
}

// stdSender sends with net/http's client (--client std).
func stdSender(ctx context.Context, hc *http.Client, url, apiKey string) func(key, body []byte) (benchReply, error) {
	auth := "Bearer " + apiKey
	var buf bytes.Buffer
	return func(key, body []byte) (benchReply, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return benchReply{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		req.Header.Set("Idempotency-Key", string(key))
		resp, err := hc.Do(req)
		if err != nil {
			return benchReply{}, err
		}
		defer resp.Body.Close()
		buf.Reset()
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return benchReply{}, err
		}
		return benchReply{status: resp.StatusCode, contentType: []byte(resp.Header.Get("Content-Type")),
			location: []byte(resp.Header.Get("Location")), body: buf.Bytes()}, nil
	}
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
