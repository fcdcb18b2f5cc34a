// Package integration runs the NodePool controller end to end: a real
// kube-apiserver and etcd, the real Cluster API controllers, the real
// payload server over HTTPS, and the sim provider, whose machines fetch
// their payload and register Nodes carrying its labels.
package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/test/harness"
)

var (
	env      *harness.Env
	settings controller.Settings
	checker  *referenceChecker
	// stopController stops the running NodePool controller and waits.
	stopController func()
)

const managementNamespace = "nodepool-system"

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	var err error
	env, err = harness.Start(ctx, harness.Options{AddToScheme: simSchemes()})
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()

	// The payload server, over HTTPS with a test CA.
	ca, err := testpki.NewCA("nodepool test CA")
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "nodepool-integration-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	certFile, keyFile, err := ca.WriteServingCert(filepath.Join(dir), "127.0.0.1", "localhost")
	if err != nil {
		return 0, err
	}
	srv, err := payloadserver.New(payloadserver.Options{Config: env.Config, Address: "127.0.0.1:0", ProbeAddress: "0", CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		return 0, err
	}
	go func() { _ = srv.Start(env.Context()) }()

	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managementNamespace}}); err != nil {
		return 0, err
	}
	if err := env.Client.Create(ctx, managementConfig("registry.example/haproxy@sha256:"+repeat("a", 64))); err != nil {
		return 0, err
	}

	settings = controller.Settings{
		Inputs: inputs.Settings{
			PayloadServerURL: "https://" + srv.Addr().(*net.TCPAddr).String() + "/ignition",
			PayloadServerCA:  ca.PEM,
			RendererVersion:  "v0.1.0-test",
		},
		TokenTTL:           time.Hour,
		CleanupGracePeriod: 5 * time.Second,
		ResyncPeriod:       3 * time.Second,
	}
	if stopController, err = startController(settings); err != nil {
		return 0, err
	}
	if err := startSim(); err != nil {
		return 0, err
	}
	checker = startReferenceChecker(env)
	code := m.Run()
	if v := checker.violations(); len(v) > 0 {
		fmt.Fprintln(os.Stderr, "INVARIANT VIOLATED: Secrets deleted while referenced:", v)
		code = 1
	}
	return code, nil
}

// startController runs the NodePool controller in its own manager, as in
// production (it has its own ClusterCache), until the returned func is called.
func startController(s controller.Settings) (func(), error) {
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: controller.CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(env.Context())
	if err := controller.Setup(ctx, mgr, s, ctrlcontroller.Options{MaxConcurrentReconciles: 4}); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "controller manager:", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// restartController stops the controller and starts it with new settings
// (a nodepool upgrade, a restart mid-rollout).
func restartController(t *testing.T, s controller.Settings) {
	t.Helper()
	stopController()
	var err error
	if stopController, err = startController(s); err != nil {
		t.Fatal(err)
	}
}

func managementConfig(proxyImage string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: inputs.DefaultManagementConfig.Namespace, Name: inputs.DefaultManagementConfig.Name},
		Data:       map[string]string{inputs.ManagementConfigKey: "apiServerProxyImage: " + proxyImage + "\n"},
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
