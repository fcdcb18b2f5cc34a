package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/secrets"
)

// failedAttempts measures one valid machine's fetches alone, then while
// fr.attackers connections from the same address (loopback) make
// fr.failures failed token attempts, and prints both and their ratio.
func failedAttempts(url string, roots *x509.CertPool, token string, want []byte, duration, warmup time.Duration, fr failureRun) error {
	newTransport := func(n int) *http.Transport {
		return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: n, DisableCompression: true}
	}
	valid := newTransport(1)
	defer valid.CloseIdleConnections()
	var alone samples
	if err := window(url, valid, 1, token, want, duration, warmup, &alone); err != nil {
		return fmt.Errorf("valid fetches alone: %w", err)
	}

	bad, err := secrets.GenerateToken()
	if err != nil {
		return err
	}
	attack := newTransport(fr.attackers)
	defer attack.CloseIdleConnections()
	client := &http.Client{Transport: attack, Timeout: time.Minute}
	var sent, refused atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range fr.attackers {
		wg.Go(func() {
			for sent.Add(1) <= int64(fr.failures) {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+bad)
				resp, err := client.Do(req)
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusNetworkAuthenticationRequired {
					failed.CompareAndSwap(nil, fmt.Errorf("a failed attempt got %d", resp.StatusCode))
					return
				}
				refused.Add(1)
			}
		})
	}
	// The valid machine fetches while the attack runs: windows until the
	// attack is over.
	var during samples
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for over := false; !over; {
		if err := window(url, valid, 1, token, want, duration/4, 0, &during); err != nil {
			return fmt.Errorf("valid fetches during the attack: %w", err)
		}
		select {
		case <-done:
			over = true
		default:
		}
	}
	attackTime := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		return fmt.Errorf("failed attempts: %w", err)
	}
	a, d := alone.result(), during.result()
	fmt.Printf("\nA valid machine's fetch (1 client) alone, then during %d failed token attempts from the same address\n", refused.Load())
	fmt.Printf("(%d connections, all 511, %.0f/s over %s; failure limiter: %g/s, burst %d, max delay %s):\n",
		fr.attackers, float64(refused.Load())/attackTime.Seconds(), attackTime.Round(100*time.Millisecond),
		float64(payloadserver.DefaultFailuresPerSecond), payloadserver.DefaultFailureBurst, fr.maxDelay)
	fmt.Printf("%-22s %10s %10s %10s\n", "", "req/s", "p50", "p99")
	fmt.Printf("%-22s %10.0f %10s %10s\n", "alone", a.rps, round(a.p50), round(a.p99))
	fmt.Printf("%-22s %10.0f %10s %10s\n", "during the attempts", d.rps, round(d.p50), round(d.p99))
	fmt.Printf("%-22s %9.2fx %9.2fx %9.2fx\n", "ratio (during/alone)", d.rps/a.rps, float64(d.p50)/float64(a.p50), float64(d.p99)/float64(a.p99))
	return nil
}

// measureIndex indexes pools pools of one size-byte payload and one token
// Secret each, as the server does, and prints what the index accounts and
// what the heap holds.
func measureIndex(pools, size int) error {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := payloadserver.NewIndex()
	start := time.Now()
	var cacheOnly int
	for i := range pools {
		pool := fmt.Sprintf("pool-%04d", i)
		p, err := composedFor(pool, size)
		if err != nil {
			return err
		}
		ps, err := secrets.NewPayloadSecret("bench", secrets.PayloadSecretName(pool, p.Hash), p)
		if err != nil {
			return err
		}
		tok, err := secrets.GenerateToken()
		if err != nil {
			return err
		}
		ts, err := secrets.NewTokenSecret("bench", pool+"-token", secrets.Token{Pool: pool, Current: tok, RotatedAt: time.Now(), PayloadHash: p.Hash})
		if err != nil {
			return err
		}
		// The index keeps the stored gzip (shared with the cache's copy)
		// and the inflated JSON; the fragments are dropped after the check.
		cacheOnly += len(ps.Data[secrets.KeyFragments]) + len(ps.Data[secrets.KeyManifest])
		for k, v := range ps.Data {
			// Exactly sized, as decoded from the API server (the
			// compressor's buffer is larger).
			ps.Data[k] = bytes.Clone(v)
		}
		if err := ix.Upsert(ps); err != nil {
			return err
		}
		if err := ix.Upsert(ts); err != nil {
			return err
		}
	}
	took := time.Since(start)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := ix.Stats()
	fmt.Printf("%d pools, payloads of %d KiB (random base64 file, as an embedded binary): indexed and verified in %s (%s each)\n",
		pools, size>>10, took.Round(time.Millisecond), (took / time.Duration(pools)).Round(time.Microsecond))
	fmt.Printf("index accounting: %d payloads, %.1f MiB (%.0f KiB each: JSON + gzip); default budget %d MiB\n",
		st.PayloadSecrets, float64(st.Bytes)/(1<<20), float64(st.Bytes)/float64(pools)/1024, payloadserver.DefaultMaxIndexBytes>>20)
	fmt.Printf("heap in use after GC: %.1f MiB more than before, for the index alone; the server's informer cache adds the\n"+
		"fragments and manifests of the payload Secrets, %.1f MiB here (the gzip it shares with the index)\n",
		float64(after.HeapInuse-before.HeapInuse)/(1<<20), float64(cacheOnly)/(1<<20))
	return nil
}
