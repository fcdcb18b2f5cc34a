// Command payloadserver benchmarks the payload server's HTTPS handler
// against Go's http.FileServer over TLS serving the same bytes, on
// loopback, at several client concurrencies; run by `make bench`.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/internal/secrets"
)

func main() {
	var (
		size        = flag.Int("size", 200<<10, "payload size in bytes")
		duration    = flag.Duration("duration", 6*time.Second, "measured time per server and concurrency, split into -rounds windows")
		rounds      = flag.Int("rounds", 3, "measured windows per server and concurrency, alternating between the servers")
		warmup      = flag.Duration("warmup", 500*time.Millisecond, "unmeasured time before each window, once every client has connected")
		concurrency = flag.String("concurrency", "1,50,500", "comma-separated numbers of concurrent clients")
		failures    = flag.Int("failures", 10000, "failed token attempts from one source during the valid-fetch comparison (0 skips it)")
		attackers   = flag.Int("attackers", 1000, "concurrent connections sending the failed attempts")
		failDelay   = flag.Duration("failure-max-delay", payloadserver.DefaultMaxFailureDelay, "the failure limiter's longest delay during the comparison (the server's default; a short one, such as 10ms, keeps the attacker busiest)")
		indexPools  = flag.Int("index-pools", 0, "instead of the throughput benchmark, index this many pools of -size payloads and print the index's accounting and the heap")
		gomemlimit  = flag.String("gomemlimit", "900MiB", "GOMEMLIMIT of the server -rss-pools runs, as config/payload-server sets it")
		rssPools    = flag.Int("rss-pools", 0, "instead of the throughput benchmark, store this many pools of -size payloads in a test API server ($NODEPOOL_ASSETS), run `nodepool payload-server` on them and print its resident memory")
	)
	flag.Parse()
	if *rssPools > 0 {
		if err := measureRSS(*rssPools, *size, *gomemlimit); err != nil {
			fail(err)
		}
		return
	}
	if *indexPools > 0 {
		if err := measureIndex(*indexPools, *size); err != nil {
			fail(err)
		}
		return
	}
	if *rounds < 1 || *duration <= 0 {
		fail(fmt.Errorf("-rounds and -duration must be positive"))
	}
	var levels []int
	for f := range strings.SplitSeq(*concurrency, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fail(fmt.Errorf("-concurrency: %q is not a positive number", f))
		}
		levels = append(levels, n)
	}
	if err := run(*size, *duration, *warmup, *rounds, levels, failureRun{*failures, *attackers, *failDelay}); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// target is one server under test.
type target struct {
	name string
	url  string
	stop func()
}

// failureRun configures the comparison of a valid machine's fetch with and
// without failed attempts from the same source.
type failureRun struct {
	failures, attackers int
	maxDelay            time.Duration
}

func run(size int, duration, warmup time.Duration, rounds int, levels []int, fr failureRun) error {
	ca, err := testpki.NewCA("bench-ca")
	if err != nil {
		return err
	}
	cert, err := ca.IssueTLS()
	if err != nil {
		return err
	}
	pl, err := composed(size)
	if err != nil {
		return err
	}
	ignition := pl.Ignition
	token, err := secrets.GenerateToken()
	if err != nil {
		return err
	}

	limiter := payloadserver.NewFailureLimiter(payloadserver.FailureLimits{MaxDelay: fr.maxDelay})
	ours, err := startPayloadServer(pl, token, &cert, limiter)
	if err != nil {
		return err
	}
	defer ours.stop()
	files, err := startFileServer(ignition, &cert)
	if err != nil {
		return err
	}
	defer files.stop()

	fmt.Printf("payload %d KiB, TLS 1.3 on loopback, HTTP/1.1 keep-alive, %s measured per server and concurrency in %d alternating windows\n",
		size>>10, duration, rounds)
	fmt.Printf("GOMAXPROCS=%d, %s, identity encoding, load average at start %s; clients and servers share the CPUs.\n\n",
		runtime.GOMAXPROCS(0), runtime.Version(), loadAverage())
	fmt.Printf("%-8s %-16s %10s %10s %10s %10s\n", "clients", "server", "req/s", "MiB/s", "p50", "p99")
	for _, c := range levels {
		// Each server gets its own clients, kept across rounds; rounds
		// alternate between the servers so a change in the machine's load
		// hits both alike.
		trs := make([]*http.Transport, 2)
		for i := range trs {
			trs[i] = &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: ca.Pool()},
				MaxIdleConnsPerHost: c,
				// Identity, as http.FileServer serves; Ignition asks for
				// gzip, which the payload server sends as stored.
				DisableCompression: true,
			}
		}
		var acc [2]samples
		targets := []target{ours, files}
		for r := range rounds {
			for j := range targets {
				i := (j + r) % 2
				if err := window(targets[i].url, trs[i], c, token, ignition, duration/time.Duration(rounds), warmup, &acc[i]); err != nil {
					return fmt.Errorf("%s at %d clients: %w", targets[i].name, c, err)
				}
			}
		}
		var res [2]result
		for i, t := range targets {
			trs[i].CloseIdleConnections()
			if len(acc[i].lat) == 0 {
				return fmt.Errorf("%s at %d clients: no request completed inside the measured windows", t.name, c)
			}
			res[i] = acc[i].result()
			fmt.Printf("%-8d %-16s %10.0f %10.1f %10s %10s\n", c, t.name, res[i].rps, res[i].mibps, round(res[i].p50), round(res[i].p99))
		}
		fmt.Printf("%-8s %-16s %9.2fx %10s %10s %9.2fx\n\n", "", "ratio (ours/fs)", res[0].rps/res[1].rps, "", "",
			float64(res[0].p99)/float64(res[1].p99))
	}
	fmt.Println("ratio: req/s above 1 means the payload server is faster; p99 below 1 means its tail is shorter.")
	if fr.failures > 0 {
		return failedAttempts(ours.url, ca.Pool(), token, ignition, duration/time.Duration(rounds), warmup, fr)
	}
	return nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func round(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// payloadOf returns an Ignition config of about size bytes: one file whose
// contents are random base64, as a config with an embedded binary looks.
func payloadOf(size int) []byte {
	const head = `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/opt/bin/blob","contents":{"source":"data:;base64,`
	const tail = `"},"mode":493}]}}`
	n := size - len(head) - len(tail)
	raw := make([]byte, n*3/4+3)
	_, _ = rand.Read(raw)
	b64 := base64.StdEncoding.EncodeToString(raw)[:n]
	b64 = b64[:len(b64)/4*4]
	out := []byte(head + b64 + tail)
	for len(out) < size { // pad with whitespace, still JSON
		out = append(out, ' ')
	}
	return out
}

// composed is a payload of about size bytes composed as the controller
// composes one (the payload server serves nothing else): its user-configs
// fragment is payloadOf(size), the other fragments are empty.
func composed(size int) (secrets.Payload, error) { return composedFor("bench", size) }

// composedFor is composed for another pool.
func composedFor(pool string, size int) (secrets.Payload, error) {
	frags := map[inputs.Component][]byte{}
	for _, c := range inputs.Components() {
		frags[c] = []byte(`{"ignition":{"version":"3.5.0"}}`)
	}
	frags[inputs.UserConfigs] = payloadOf(size)
	p, err := payload.Compose(pool, frags)
	if err != nil {
		return secrets.Payload{}, fmt.Errorf("composing the benchmark payload: %w", err)
	}
	out := secrets.Payload{Pool: pool, Hash: p.Hash, Ignition: p.Ignition, Manifest: map[string]string{}, Fragments: map[string][]byte{}}
	for c, f := range p.Fragments {
		out.Manifest[c.Name()] = p.Manifest[c]
		out.Fragments[c.Name()] = f
	}
	return out, nil
}

// startPayloadServer serves the payload server's handler, TLS configuration
// and http.Server settings over an index holding one pool.
func startPayloadServer(p secrets.Payload, token string, cert *tls.Certificate, limiter *payloadserver.FailureLimiter) (target, error) {
	ix := payloadserver.NewIndex()
	ps, err := secrets.NewPayloadSecret("bench", secrets.PayloadSecretName(p.Pool, p.Hash), p)
	if err != nil {
		return target{}, err
	}
	ts, err := secrets.NewTokenSecret("bench", "bench-token", secrets.Token{Pool: "bench", Current: token, RotatedAt: time.Now(), PayloadHash: p.Hash})
	if err != nil {
		return target{}, err
	}
	if err := ix.Upsert(ps); err != nil {
		return target{}, err
	}
	if err := ix.Upsert(ts); err != nil {
		return target{}, err
	}
	m, err := payloadserver.NewMetrics(prometheus.NewRegistry(), ix)
	if err != nil {
		return target{}, err
	}
	h := payloadserver.NewHandler(ix, payloadserver.HandlerOptions{Metrics: m, OnFirstFetch: func(payloadserver.TokenSecretRef) {}, Failures: limiter})
	srv := payloadserver.NewTLSServer(h, func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }, payloadserver.Options{})
	return serve("payload-server", srv, payloadserver.IgnitionPath)
}

// startFileServer serves the same bytes from a file with http.FileServer,
// over TLS with Go's defaults.
func startFileServer(ignition []byte, cert *tls.Certificate) (target, error) {
	dir, err := os.MkdirTemp("", "bench-fileserver-")
	if err != nil {
		return target{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ignition"), ignition, 0o600); err != nil {
		return target{}, err
	}
	srv := &http.Server{
		Handler:   http.FileServer(http.Dir(dir)),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{*cert}},
	}
	t, err := serve("http.FileServer", srv, "/ignition")
	stop := t.stop
	t.stop = func() { stop(); _ = os.RemoveAll(dir) }
	return t, err
}

func serve(name string, srv *http.Server, path string) (target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return target{}, err
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return target{
		name: name,
		url:  "https://" + ln.Addr().String() + path,
		stop: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		},
	}, nil
}

type result struct {
	rps, mibps float64
	p50, p99   time.Duration
}

// samples accumulate the requests of the measured windows of one server at
// one concurrency.
type samples struct {
	lat     []time.Duration
	bytes   int64
	elapsed time.Duration
}

func (s samples) result() result {
	all := slices.Clone(s.lat)
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	return result{
		rps:   float64(len(all)) / s.elapsed.Seconds(),
		mibps: float64(s.bytes) / s.elapsed.Seconds() / (1 << 20),
		p50:   pct(0.50),
		p99:   pct(0.99),
	}
}

// window runs clients goroutines on tr (one connection each, kept across
// windows), waits until every client has completed a request and warmup
// has passed, then measures for duration: only requests that start and end
// inside the window count. Every response is checked.
func window(url string, tr *http.Transport, clients int, token string, want []byte, duration, warmup time.Duration, into *samples) error {
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	var (
		winStart atomic.Int64 // unix nanos; 0 before the window
		closed   atomic.Bool
		stop     atomic.Bool
		warm     sync.WaitGroup
		wg       sync.WaitGroup
		failed   atomic.Value
		mu       sync.Mutex
	)
	warm.Add(clients)
	for range clients {
		wg.Go(func() {
			var lat []time.Duration
			var n int64
			buf := bytes.NewBuffer(make([]byte, 0, len(want)+1024))
			first := true
			defer func() {
				if first {
					warm.Done()
				}
				mu.Lock()
				into.lat = append(into.lat, lat...)
				into.bytes += n
				mu.Unlock()
			}()
			for !stop.Load() {
				start := time.Now()
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				buf.Reset()
				_, err = io.Copy(buf, resp.Body)
				_ = resp.Body.Close()
				d := time.Since(start)
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(buf.Bytes(), want) {
					failed.CompareAndSwap(nil, fmt.Errorf("status %d, %d bytes, %v", resp.StatusCode, buf.Len(), err))
					return
				}
				if first {
					first = false
					warm.Done()
				}
				if ws := winStart.Load(); ws != 0 && start.UnixNano() >= ws && !closed.Load() {
					lat = append(lat, d)
					n += int64(buf.Len())
				}
			}
		})
	}
	warm.Wait()
	time.Sleep(warmup)
	begin := time.Now()
	winStart.Store(begin.UnixNano())
	time.Sleep(duration)
	closed.Store(true)
	into.elapsed += time.Since(begin)
	stop.Store(true)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return nil
}
