//go:build !fuzzonly

package payloadserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"nodepool.dev/nodepool/internal/payloadserver/testpki"
)

// TestCommandServesUntilCancelled runs `nodepool payload-server` as a user
// would, with a kubeconfig and certificate files, until it is ready, then
// stops it.
func TestCommandServesUntilCancelled(t *testing.T) {
	e := testEnv(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.Config.CertData, ClientKeyData: e.Config.KeyData, Token: e.Config.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	ca, err := testpki.NewCA("command-test")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.WriteServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	probe := freeAddress(t)
	cmd := NewCommand()
	cmd.SetArgs([]string{
		"--kubeconfig", kubeconfig,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--bind-address", "127.0.0.1:0", "--probe-bind-address", probe,
		"--zap-log-level", "error",
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	eventually(t, 30*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	// The build it runs, beside its own metrics.
	resp, err := http.Get("http://" + probe + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(metrics), "nodepool_build_info{goversion=") {
		t.Errorf("/metrics has no nodepool_build_info:\n%s", metrics)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the command ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not stop within 30s of its context ending")
	}
}

func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}
