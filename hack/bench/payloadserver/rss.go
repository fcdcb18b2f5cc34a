package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/harness"
)

// measureRSS stores pools pools of one size-byte payload and one token
// Secret each, controlled by a NodePool as the controller writes them, in a
// test API server (NODEPOOL_ASSETS), runs `nodepool payload-server` on them
// as its own process, fetches every payload once, and prints the process's
// resident memory.
func measureRSS(pools, size int, gomemlimit string) error {
	ctx := context.Background()
	env, err := harness.Start(ctx, harness.Options{WithoutCAPIControllers: true})
	if err != nil {
		return fmt.Errorf("starting the test API server (set %s): %w", harness.AssetsEnv, err)
	}
	defer func() { _ = env.Stop() }()
	const ns = "rss"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}

	tokens := make([]string, pools)
	wants := make([][]byte, pools)
	var stored int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, pools)
	work := make(chan int)
	start := time.Now()
	for range 4 {
		wg.Go(func() {
			for i := range work {
				if err := storePool(ctx, env, ns, i, size, tokens, wants, &stored, &mu); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range pools {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("%d pools of %d KiB payloads stored in %s (%.1f MiB of Secret data)\n", pools, size>>10, time.Since(start).Round(time.Second), float64(stored)/(1<<20))

	dir, err := os.MkdirTemp("", "payload-server-rss-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "nodepool")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nodepool")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building nodepool: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["rss"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["rss"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	kc.Contexts["rss"] = &clientcmdapi.Context{Cluster: "rss", AuthInfo: "rss"}
	kc.CurrentContext = "rss"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return err
	}
	ca, err := testpki.NewCA("rss-ca")
	if err != nil {
		return err
	}
	certFile, keyFile, err := ca.WriteServingCert(dir)
	if err != nil {
		return err
	}
	addr, probe := freeAddr(), freeAddr()
	srv := exec.Command(bin, "payload-server", "--kubeconfig", kubeconfig, "--namespace", ns,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--bind-address", addr, "--probe-bind-address", probe, "--zap-log-level", "error")
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	// As the shipped Deployment runs it.
	srv.Env = append(os.Environ(), "GOMEMLIMIT="+gomemlimit)
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	started := time.Now()
	for {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(started) > 15*time.Minute {
			return fmt.Errorf("the payload server was not ready within 15 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	ready := time.Since(started)
	readyRSS, _ := procStatus(srv.Process.Pid, "VmRSS")

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}, Timeout: time.Minute}
	for i, tok := range tokens {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/ignition", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != string(wants[i]) {
			return fmt.Errorf("pool %d: status %d, %d bytes, %v", i, resp.StatusCode, len(body), err)
		}
	}
	rss, _ := procStatus(srv.Process.Pid, "VmRSS")
	hwm, _ := procStatus(srv.Process.Pid, "VmHWM")
	metrics := scrape("http://"+probe+"/metrics", "nodepool_payload_server_index_bytes", "go_memstats_heap_inuse_bytes")
	fmt.Printf("payload server (GOMEMLIMIT=%s) ready in %s; every payload fetched once\n", gomemlimit, ready.Round(100*time.Millisecond))
	fmt.Printf("resident memory: %s when ready, %s after the fetches, peak %s\n", readyRSS, rss, hwm)
	fmt.Printf("index_bytes %s, heap in use %s\n", metrics["nodepool_payload_server_index_bytes"], metrics["go_memstats_heap_inuse_bytes"])
	return nil
}

// storePool creates pool i: its payload Secret and token Secret, controlled
// by a NodePool UID, as the controller writes them.
func storePool(ctx context.Context, env *harness.Env, ns string, i, size int, tokens []string, wants [][]byte, stored *int64, mu *sync.Mutex) error {
	pool := fmt.Sprintf("pool-%04d", i)
	p, err := composedFor(pool, size)
	if err != nil {
		return err
	}
	ps, err := secrets.NewPayloadSecret(ns, secrets.PayloadSecretName(pool, p.Hash), p)
	if err != nil {
		return err
	}
	tok, err := secrets.GenerateToken()
	if err != nil {
		return err
	}
	ts, err := secrets.NewTokenSecret(ns, pool+"-token", secrets.Token{Pool: pool, Current: tok, RotatedAt: time.Now(), PayloadHash: p.Hash})
	if err != nil {
		return err
	}
	uid := uuid.NewUUID()
	yes := true
	for _, s := range []*corev1.Secret{ps, ts} {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: pool, UID: uid, Controller: &yes}}
		if err := env.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("creating %s: %w", s.Name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	tokens[i], wants[i] = tok, p.Ignition
	for _, v := range ps.Data {
		*stored += int64(len(v))
	}
	return nil
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// procStatus returns a field of /proc/<pid>/status, such as "VmRSS".
func procStatus(pid int, field string) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == field {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// scrape returns the values of the named unlabelled metrics.
func scrape(url string, names ...string) map[string]string {
	out := map[string]string{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for _, n := range names {
			if v, ok := strings.CutPrefix(sc.Text(), n+" "); ok {
				out[n] = v
			}
		}
	}
	return out
}
