// Command edgebench measures a URL over HTTP/1.1, HTTP/2 or HTTP/3, with
// fresh (cold) or reused (warm) connections, and prints connect, TLS, time
// to first byte and total time side by side for every target. With -load it
// sends requests open loop at a fixed rate instead. The measuring is done by
// internal/edgebench; this is its flag and output layer.
//
//	edgebench -proto h2 -n 20 -cold -H 'Accept-Encoding: br' -k https://localhost:8443/ [URL2]
//	edgebench -proto h1,h2,h3 -cold -warm -k https://localhost:8443/
//	edgebench -load -rate 200 -duration 30s -k https://localhost:8443/
//	edgebench -proto h3 -class new,resumed,0rtt -html report.html -k https://localhost:8443/
//	edgebench -load -proto h3 -mix new=20,resumed=70,0rtt=10 -k https://localhost:8443/
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/edgebench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// headerFlag collects repeated -H 'Name: value' flags.
type headerFlag http.Header

func (h headerFlag) String() string { return "" }

func (h headerFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("%q: want 'Name: value'", v)
	}
	http.Header(h).Add(name, strings.TrimSpace(value))
	return nil
}

// run is main without the process: it returns the exit code (2 for bad
// flags, 1 when a target could not be measured).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("edgebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edgebench [flags] URL [URL2]\n\nTwo URLs, several -proto values or both -cold and -warm are measured one after another and shown side by side.\n\nflags:")
		fs.PrintDefaults()
	}
	header := headerFlag{}
	protoList := fs.String("proto", "h2", "protocols to speak, comma-separated: h1, h2, h3")
	n := fs.Int("n", edgebench.DefaultRequests, "probe mode: measured requests per target")
	cold := fs.Bool("cold", false, "a fresh connection (and full handshake) for every request")
	warm := fs.Bool("warm", false, "reuse one connection (the default; with -cold, measure both)")
	fs.Var(header, "H", "extra request header 'Name: value' (repeatable), e.g. -H 'Accept-Encoding: br'")
	insecure := fs.Bool("k", false, "skip certificate verification")
	timeout := fs.Duration("timeout", edgebench.DefaultTimeout, "per request, handshakes and body included")
	localAddr := fs.String("local-addr", "", "source IP to dial from, e.g. 127.0.0.2")
	load := fs.Bool("load", false, "load mode: send open loop at -rate for -duration")
	rate := fs.Float64("rate", 100, "load mode: requests per second")
	duration := fs.Duration("duration", 10*time.Second, "load mode: how long to send")
	classList := fs.String("class", "", "connection classes, comma-separated, each measured as its own target: new, resumed, 0rtt (0rtt: h3 only)")
	mixList := fs.String("mix", "", "one target dealing classes by weight, e.g. new=20,resumed=70,0rtt=10 (0rtt: h3 only)")
	htmlOut := fs.String("html", "", "also write a self-contained HTML report (latency CDFs, the first byte's split by a PoP's Server-Timing, responses and errors per second) to this file")
	jsonOut := fs.Bool("json", false, "print results as JSON (durations in nanoseconds) instead of a table")
	quiet := fs.Bool("q", false, "no progress on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "edgebench: "+format+"\n", a...)
		fs.Usage()
		return 2
	}
	urls := fs.Args()
	if len(urls) == 0 || len(urls) > 2 {
		return usage("want one URL, or two to compare; got %d", len(urls))
	}
	protos, err := edgebench.ParseProtos(*protoList)
	if err != nil {
		return usage("-proto: %v", strings.TrimPrefix(err.Error(), "edgebench: "))
	}
	if *n < 1 {
		return usage("-n %d: must be at least 1", *n)
	}
	if *load && !(*rate > 0) {
		return usage("-rate %v: must be a positive number of requests per second", *rate)
	}
	if *load && *duration <= 0 {
		return usage("-duration %v: must be positive", *duration)
	}
	if *timeout <= 0 {
		return usage("-timeout %v: must be positive", *timeout)
	}
	modes := []bool{false} // cold?
	if *cold {
		modes = []bool{true}
		if *warm {
			modes = []bool{true, false}
		}
	}
	// Each target's mix: none (cold/warm), one class each, or one mix.
	mixes := []edgebench.Mix{nil}
	switch {
	case *classList != "" && *mixList != "":
		return usage("-class and -mix: give one (-class measures each class apart, -mix deals them in one run)")
	case (*classList != "" || *mixList != "") && (*cold || *warm):
		return usage("-cold/-warm with -class or -mix: every class request opens a fresh connection; drop -cold/-warm")
	case *classList != "":
		mixes = nil
		for _, name := range strings.Split(*classList, ",") {
			m, err := edgebench.ParseMix(strings.TrimSpace(name))
			if err != nil || strings.Contains(name, "=") {
				return usage("-class %q: want new, resumed or 0rtt, comma-separated", *classList)
			}
			mixes = append(mixes, m)
		}
		modes = []bool{true}
	case *mixList != "":
		m, err := edgebench.ParseMix(*mixList)
		if err != nil {
			return usage("-mix: %v", strings.TrimPrefix(err.Error(), "edgebench: "))
		}
		mixes, modes = []edgebench.Mix{m}, []bool{true}
	}

	var configs []edgebench.Config
	for _, u := range urls {
		for _, p := range protos {
			for _, m := range mixes {
				if err := m.Validate(p, strings.HasPrefix(u, "https://")); err != nil {
					return usage("%v", strings.TrimPrefix(err.Error(), "edgebench: "))
				}
				for _, c := range modes {
					configs = append(configs, edgebench.Config{
						URL: u, Proto: p, Cold: c, Mix: m, Requests: *n, Header: http.Header(header),
						Insecure: *insecure, Timeout: *timeout, LocalAddr: *localAddr,
					})
				}
			}
		}
	}
	progress := func(i int, cfg edgebench.Config) {
		if !*quiet {
			fmt.Fprintf(stderr, "%c: %s %s\n", 'A'+i, cfg.Label(), cfg.URL)
		}
	}

	if *load {
		var results []*edgebench.LoadResult
		for i, cfg := range configs {
			progress(i, cfg)
			lc := edgebench.LoadConfig{Config: cfg, Rate: *rate, Duration: *duration}
			if !*quiet {
				lc.Progress = stderr
			}
			res, err := edgebench.Load(ctx, lc)
			if res == nil {
				fmt.Fprintf(stderr, "edgebench: %v\n", err)
				return 1
			}
			results = append(results, res)
			if err != nil { // interrupted: report what was measured
				break
			}
		}
		report := &edgebench.Report{Title: "edgebench load"}
		for _, r := range results {
			report.AddLoad("", r)
		}
		if code := writeHTML(stderr, *htmlOut, report); code != 0 {
			return code
		}
		return output(stdout, stderr, *jsonOut, map[string]any{"load": results}, func() { edgebench.WriteLoadTable(stdout, results...) })
	}
	var results []*edgebench.Result
	for i, cfg := range configs {
		progress(i, cfg)
		stop := func() {}
		if !*quiet {
			stop = probeProgress(stderr, &cfg)
		}
		res, err := edgebench.Run(ctx, cfg)
		stop()
		if res == nil {
			fmt.Fprintf(stderr, "edgebench: %v\n", err)
			return 1
		}
		results = append(results, res)
		if err != nil {
			break
		}
	}
	report := &edgebench.Report{Title: "edgebench"}
	for _, r := range results {
		report.AddResult("", r)
	}
	if code := writeHTML(stderr, *htmlOut, report); code != 0 {
		return code
	}
	return output(stdout, stderr, *jsonOut, map[string]any{"results": results}, func() { edgebench.WriteTable(stdout, results...) })
}

// writeHTML writes the report to path, if one was given.
func writeHTML(stderr io.Writer, path string, report *edgebench.Report) int {
	if path == "" {
		return 0
	}
	f, err := os.Create(path)
	if err == nil {
		err = report.WriteHTML(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "edgebench: -html %s: %v\n", path, err)
		return 1
	}
	return 0
}

// probeProgress makes cfg count its samples and writes a line a second
// while the run lasts, until stop is called.
func probeProgress(w io.Writer, cfg *edgebench.Config) (stop func()) {
	var done, failed atomic.Int64
	cfg.OnSample = func(s edgebench.Sample) {
		done.Add(1)
		if s.Err != nil {
			failed.Add(1)
		}
	}
	return edgebench.ReportEvery(w, time.Second, func(elapsed time.Duration) string {
		return fmt.Sprintf("%5.0fs  done %d/%d  errors %d", elapsed.Seconds(), done.Load(), cfg.Requests, failed.Load())
	})
}

func output(stdout, stderr io.Writer, asJSON bool, v any, table func()) int {
	if !asJSON {
		fmt.Fprintln(stdout)
		table()
		return 0
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "edgebench: %v\n", err)
		return 1
	}
	return 0
}
