package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"nodepool.dev/nodepool/internal/pki"
)

// Names in the kubeconfig the dev environment writes.
const (
	kubeconfigCluster = "nodepool-dev"
	kubeconfigUser    = "nodepool-dev-admin"
)

// controlPlaneStartTimeout bounds the start of etcd and of kube-apiserver.
const controlPlaneStartTimeout = 2 * time.Minute

// controlPlane is etcd and kube-apiserver, run from the binaries in
// bin/k8s with their state in the data dir.
type controlPlane struct {
	etcd, apiserver *process
	// config reaches the API server as an administrator (system:masters).
	config *rest.Config
}

// controlPlaneOptions says where the binaries and the state are, and the ports.
type controlPlaneOptions struct {
	// out receives what the terminal should know.
	out                                   io.Writer
	binDir, dataDir                       string
	apiServerPort, etcdPort, etcdPeerPort int
}

// startControlPlane starts etcd on dataDir/etcd (kept across restarts) and
// kube-apiserver with certificates from dataDir/pki, and waits until the
// API server is ready. On error nothing is left running.
func startControlPlane(ctx context.Context, o controlPlaneOptions) (_ *controlPlane, retErr error) {
	etcdBin, apiServerBin := filepath.Join(o.binDir, "etcd"), filepath.Join(o.binDir, "kube-apiserver")
	for _, b := range []string{etcdBin, apiServerBin} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s is missing: run hack/tools/build-control-plane.sh (or `make control-plane`), or pass --assets-dir: %w", b, err)
		}
	}
	// The API server first: it would write to etcd while etcd stops.
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if did := stopStale(name, filepath.Join(o.dataDir, name+".pid"), o.dataDir); did != "" {
			fmt.Fprintln(o.out, "  "+did)
		}
	}
	for flag, port := range map[string]int{"--apiserver-port": o.apiServerPort, "--etcd-port": o.etcdPort, "--etcd-peer-port": o.etcdPeerPort} {
		if err := portFree(port); err != nil {
			return nil, fmt.Errorf("port %d is in use (%v): stop what uses it (an earlier `nodepool dev up`?) or pass another %s", port, err, flag)
		}
	}
	pki := filepath.Join(o.dataDir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, err
	}
	ca, err := loadOrCreateCA(pki, "ca", "nodepool dev cluster CA")
	if err != nil {
		return nil, err
	}
	saKey, err := loadOrCreateKey(filepath.Join(pki, "service-account.key"))
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := ca.issueFiles(pki, "apiserver", leaf{commonName: "kube-apiserver", hosts: []string{"127.0.0.1", "localhost", "kubernetes.default.svc"}})
	if err != nil {
		return nil, err
	}
	adminCert, adminKey, err := ca.issue(leaf{commonName: kubeconfigUser, organizations: []string{"system:masters"}, client: true})
	if err != nil {
		return nil, err
	}

	cp := &controlPlane{}
	defer func() {
		if retErr != nil {
			_ = cp.stop()
		}
	}()
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(o.etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(o.etcdPeerPort)
	cp.etcd, err = startProcess("etcd", etcdBin, []string{
		"--name=nodepool-dev",
		"--data-dir=" + filepath.Join(o.dataDir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=nodepool-dev=" + peerURL,
		// A development store: a clean stop keeps everything; only a crash of
		// the machine itself could lose the last writes.
		"--unsafe-no-fsync=true",
		"--auto-compaction-mode=periodic",
		"--auto-compaction-retention=1h",
	}, filepath.Join(o.dataDir, "etcd.log"), filepath.Join(o.dataDir, "etcd.pid"))
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cp.etcd, "etcd", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/health says %s", resp.Status)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	cp.apiserver, err = startProcess("kube-apiserver", apiServerBin, []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.apiServerPort),
		"--cert-dir=" + pki,
		"--tls-cert-file=" + servingCert,
		"--tls-private-key-file=" + servingKey,
		"--client-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// No controller manager runs, so nothing would create the default
		// ServiceAccount that this admission plugin waits for.
		"--disable-admission-plugins=ServiceAccount",
		// Close watches on SIGTERM instead of waiting for their clients:
		// Cluster API's ClusterCache keeps some open until the process ends.
		"--shutdown-watch-termination-grace-period=2s",
	}, filepath.Join(o.dataDir, "kube-apiserver.log"), filepath.Join(o.dataDir, "kube-apiserver.pid"))
	if err != nil {
		return nil, err
	}
	cp.config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(o.apiServerPort),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.pem, CertData: adminCert, KeyData: adminKey},
		QPS:             200,
		Burst:           400,
	}
	cs, err := kubernetes.NewForConfig(cp.config)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cp.apiserver, "kube-apiserver", func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	return cp, nil
}

// waitFor polls check until it succeeds, the process exits, or the start
// timeout passes.
func waitFor(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, controlPlaneStartTimeout)
	defer cancel()
	var last error
	for {
		if done, _ := p.exited(); done {
			return p.failure()
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s was not ready within %s (last: %v); see %s", what, controlPlaneStartTimeout, last, p.logPath)
			}
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop stops kube-apiserver, then etcd.
func (cp *controlPlane) stop() error {
	return errors.Join(cp.apiserver.stop(20*time.Second), cp.etcd.stop(20*time.Second))
}

// failed returns the failure of a process that exited on its own, or nil.
func (cp *controlPlane) failed() error {
	for _, p := range []*process{cp.etcd, cp.apiserver} {
		if done, _ := p.exited(); done {
			return p.failure()
		}
	}
	return nil
}

// writeKubeconfig writes an administrator kubeconfig for cfg to path.
func writeKubeconfig(path string, cfg *rest.Config) error {
	context := kubeconfigCluster
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{kubeconfigCluster: {
			Server: cfg.Host, CertificateAuthorityData: cfg.CAData,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{kubeconfigUser: {
			ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		}},
		Contexts:       map[string]*clientcmdapi.Context{context: {Cluster: kubeconfigCluster, AuthInfo: kubeconfigUser, Namespace: devNamespace}},
		CurrentContext: context,
	}
	b, err := clientcmd.Write(kc)
	if err != nil {
		return err
	}
	return pki.WriteFileAtomic(path, b)
}

// portFree reports whether a TCP port on loopback can be bound.
func portFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}
