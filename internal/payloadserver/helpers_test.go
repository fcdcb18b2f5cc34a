//go:build !fuzzonly

package payloadserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/harness"
)

// The control plane starts on the first test that needs it, so the fuzz
// target and the unit tests run without it.
var (
	envOnce sync.Once
	env     *harness.Env
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	os.Exit(code)
}

func testEnv(t testing.TB) *harness.Env {
	t.Helper()
	envOnce.Do(func() {
		env, envErr = harness.Start(context.Background(), harness.Options{WithoutCAPIControllers: true})
	})
	if envErr != nil {
		t.Fatalf("starting the test control plane (set %s to the kube-apiserver and etcd folder): %v", harness.AssetsEnv, envErr)
	}
	return env
}

func testLogger() logr.Logger {
	if os.Getenv(harness.LogEnv) == "" {
		return logr.Discard()
	}
	return zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true))
}

// eventually polls cond every 50ms until it holds, failing the test after
// timeout with cond's last word.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testServer is a payload server on loopback against the test control
// plane, with a client that trusts its CA.
type testServer struct {
	*Server
	url, probeURL string
	ca            *testpki.CA
	certDir       string
	// client negotiates HTTP/1.1 without compression, as the identity
	// baseline; Ignition's own client asks for gzip.
	client   *http.Client
	registry *prometheus.Registry
}

func startServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	ts := startServerUnready(t, opts)
	ts.waitReady(t)
	return ts
}

// waitReady waits until the server's /readyz passes.
func (ts *testServer) waitReady(t testing.TB) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		ok, status := ts.ready(t)
		return ok, "/readyz says " + status
	})
}

// ready says whether /readyz passes now.
func (ts *testServer) ready(t testing.TB) (bool, string) {
	resp, err := http.Get(ts.probeURL + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// startServerUnready is startServer without waiting for readiness.
func startServerUnready(t testing.TB, opts Options) *testServer {
	t.Helper()
	e := testEnv(t)
	ca, err := testpki.NewCA("payload-server-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts.CertFile, opts.KeyFile, err = ca.WriteServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Config == nil {
		opts.Config = e.Config
	}
	opts.Address, opts.ProbeAddress = "127.0.0.1:0", "127.0.0.1:0"
	reg := prometheus.NewRegistry()
	opts.Registry = reg
	if opts.Logger.GetSink() == nil {
		opts.Logger = testLogger()
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: ca.Pool()},
		MaxIdleConnsPerHost: 64,
		DisableCompression:  true,
	}
	ts := &testServer{
		Server:   s,
		url:      "https://" + s.Addr().String(),
		probeURL: "http://" + s.ProbeAddr().String(),
		ca:       ca,
		certDir:  dir,
		client:   &http.Client{Transport: tr, Timeout: 30 * time.Second},
		registry: reg,
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("payload server stopped with: %v", err)
		}
	})
	return ts
}

// get fetches /ignition with the token; "" sends no Authorization header.
func (ts *testServer) get(t testing.TB, token string) (int, []byte) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	status, body, _, err := ts.do(http.MethodGet, IgnitionPath, h)
	if err != nil {
		t.Fatal(err)
	}
	return status, body
}

func (ts *testServer) do(method, path string, h http.Header) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(method, ts.url+path, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header = h
	resp, err := ts.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp.Header, err
}

// raw sends request bytes as they are, over a new TLS connection, and reads
// the response while still writing (a server may answer a request it
// refuses before reading all of it).
func (ts *testServer) raw(t testing.TB, request string) (int, []byte, error) {
	t.Helper()
	conn, err := tls.Dial("tcp", ts.Addr().String(), &tls.Config{RootCAs: ts.ca.Pool(), NextProtos: []string{"http/1.1"}})
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = io.WriteString(conn, request) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// metric returns the value of a counter or gauge with the given labels.
func (ts *testServer) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := ts.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				}
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// controlledBy makes the NodePool pool (UID uid) the controller of obj, as
// the controller does with the Secrets it writes.
func controlledBy(obj metav1.Object, pool string, uid types.UID) {
	yes := true
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: pool, UID: uid,
		Controller: &yes, BlockOwnerDeletion: &yes,
	}})
}

// testPool is a pool's token Secret and the payload it points to, in the
// API server, both controlled by a NodePool of UID uid (the NodePool
// itself does not exist: the test control plane runs no garbage
// collector).
type testPool struct {
	ns, name    string
	uid         types.UID
	tokenSecret types.NamespacedName
	token       secrets.Token
	payload     secrets.Payload
}

func newToken(t testing.TB) string {
	t.Helper()
	tok, err := secrets.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// createPayload creates the payload Secret of p, controlled by the NodePool
// of UID owner ("": none), named as the controller names it.
func createPayload(t testing.TB, c client.Client, ns string, p secrets.Payload, owner types.UID) {
	t.Helper()
	createPayloadNamed(t, c, ns, p.Pool+"-payload-"+p.Hash[:16], p, owner, nil)
}

// createPayloadNamed creates a payload Secret of p named name, controlled by
// the NodePool of UID owner ("": none), after mut (if any) edits it.
func createPayloadNamed(t testing.TB, c client.Client, ns, name string, p secrets.Payload, owner types.UID, mut func(*corev1.Secret)) *corev1.Secret {
	t.Helper()
	s, err := secrets.NewPayloadSecret(ns, name, p)
	if err != nil {
		t.Fatal(err)
	}
	if owner != "" {
		controlledBy(s, p.Pool, owner)
	}
	if mut != nil {
		mut(s)
	}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// createTokenSecret creates a token Secret of pool serving payloadHash,
// controlled by the NodePool of UID owner ("": none).
func createTokenSecret(t testing.TB, c client.Client, ns, pool, name, payloadHash string, owner types.UID) secrets.Token {
	t.Helper()
	tok := secrets.Token{Pool: pool, Current: newToken(t), RotatedAt: time.Now(), PayloadHash: payloadHash}
	s, err := secrets.NewTokenSecret(ns, name, tok)
	if err != nil {
		t.Fatal(err)
	}
	if owner != "" {
		controlledBy(s, pool, owner)
	}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return tok
}

// createPool creates a payload of size bytes and a token Secret pointing to
// it, both controlled by a new NodePool UID.
func createPool(t testing.TB, c client.Client, ns, name string, size int) *testPool {
	t.Helper()
	uid := uuid.NewUUID()
	p := testPayload(ns, name, "v1", size)
	createPayload(t, c, ns, p, uid)
	tokName := name + "-token-0123456789abcdef"
	tok := createTokenSecret(t, c, ns, name, tokName, p.Hash, uid)
	return &testPool{ns: ns, name: name, uid: uid, tokenSecret: types.NamespacedName{Namespace: ns, Name: tokName}, token: tok, payload: p}
}

// updateToken applies mut to the pool's token Secret content. The server
// may annotate the Secret meanwhile (first fetch), so conflicts are retried,
// as the controller must.
func updateToken(t testing.TB, c client.Client, tp *testPool, mut func(secrets.Token) secrets.Token) {
	t.Helper()
	next := mut(tp.token)
	want, err := secrets.NewTokenSecret(tp.ns, tp.tokenSecret.Name, next)
	if err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s corev1.Secret
		if err := c.Get(context.Background(), tp.tokenSecret, &s); err != nil {
			return err
		}
		s.Data = want.Data
		return c.Update(context.Background(), &s)
	})
	if err != nil {
		t.Fatal(err)
	}
	tp.token = next
}

// waitServes waits until token gets want.
func waitServes(t testing.TB, ts *testServer, token string, want []byte) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		status, body := ts.get(t, token)
		return status == http.StatusOK && string(body) == string(want), fmt.Sprintf("status %d, %d bytes", status, len(body))
	})
}

// waitStatus waits until token gets status.
func waitStatus(t testing.TB, ts *testServer, token string, status int) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		got, body := ts.get(t, token)
		return got == status, fmt.Sprintf("status %d, %d bytes", got, len(body))
	})
}
