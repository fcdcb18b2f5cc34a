// Package stack starts the whole in-process nodepool stack every end-to-end
// suite runs against: the real control plane and Cluster API controllers
// (test/harness), the payload server over HTTPS with a test CA, the
// management config, the NodePool controller in its own manager and the sim
// provider, whose machines really fetch their payload and register Nodes.
// test/integration, test/gates and test/cli start it from their TestMain.
package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/harness"
)

// ManagementNamespace holds the management config.
const ManagementNamespace = "nodepool-system"

// RendererVersion is the renderer version the stack's controller runs with.
const RendererVersion = "v0.1.0-test"

// Stack is the running stack.
type Stack struct {
	// Env is the control plane, with an uncached client.
	Env *harness.Env
	// Settings are the NodePool controller's.
	Settings controller.Settings

	dir            string
	mu             sync.Mutex
	stopController func()
	// payloadServer is how the payload server is started again on the
	// same address, and stopPayloadServer stops the running one.
	payloadServer     payloadserver.Options
	stopPayloadServer func()
	// apiServer is the controller's way to the API server, which
	// CutAPIServer cuts.
	apiServer *Forwarder
	// workload is where the sim provider's workload clusters are; nil is
	// the stack's own API server (move.go).
	workload *rest.Config
}

// Start starts the stack; call Stop when done.
func Start(ctx context.Context) (*Stack, error) { return start(ctx, nil) }

// start starts a stack whose sim provider's workload clusters are on the
// API server workload reaches (nil: the stack's own).
func start(ctx context.Context, workload *rest.Config) (_ *Stack, retErr error) {
	env, err := harness.Start(ctx, harness.Options{AddToScheme: []func(*runtime.Scheme) error{sim.AddToScheme}})
	if err != nil {
		return nil, err
	}
	s := &Stack{Env: env, workload: workload}
	defer func() {
		if retErr != nil {
			_ = s.Stop()
		}
	}()
	// The payload server, over HTTPS with a test CA.
	ca, err := testpki.NewCA("nodepool test CA")
	if err != nil {
		return nil, err
	}
	if s.dir, err = os.MkdirTemp("", "nodepool-stack-"); err != nil {
		return nil, err
	}
	certFile, keyFile, err := ca.WriteServingCert(s.dir, "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	s.payloadServer = payloadserver.Options{Config: env.Config, Address: "127.0.0.1:0", ProbeAddress: "0", CertFile: certFile, KeyFile: keyFile}
	srv, err := s.startPayloadServer()
	if err != nil {
		return nil, err
	}
	s.payloadServer.Address = srv.Addr().String()

	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagementNamespace}}); err != nil {
		return nil, err
	}
	if err := env.Client.Create(ctx, ManagementConfig("registry.example/haproxy@sha256:"+strings.Repeat("a", 64))); err != nil {
		return nil, err
	}
	s.Settings = controller.Settings{
		Inputs: inputs.Settings{
			PayloadServerURL: "https://" + srv.Addr().(*net.TCPAddr).String() + "/ignition",
			PayloadServerCA:  ca.PEM,
			RendererVersion:  RendererVersion,
		},
		TokenTTL:           time.Hour,
		CleanupGracePeriod: 5 * time.Second,
		ResyncPeriod:       3 * time.Second,
	}
	apiHost := env.Config.Host
	if !strings.Contains(apiHost, "://") {
		apiHost = "https://" + apiHost
	}
	host, err := url.Parse(apiHost)
	if err != nil {
		return nil, err
	}
	if s.apiServer, err = NewForwarder(host.Host); err != nil {
		return nil, err
	}
	if s.stopController, err = s.startController(s.Settings, nil); err != nil {
		return nil, err
	}
	if err := s.startSim(); err != nil {
		return nil, err
	}
	return s, nil
}

// Stop stops the controller, the managers and the control plane.
func (s *Stack) Stop() error {
	s.mu.Lock()
	stop := s.stopController
	s.stopController = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	err := s.Env.Stop()
	if s.apiServer != nil {
		s.apiServer.Close()
	}
	if s.dir != "" {
		err = errors.Join(err, os.RemoveAll(s.dir))
	}
	return err
}

// RestartController stops the NodePool controller and starts it with new
// settings (a nodepool upgrade, a restart mid-rollout).
func (s *Stack) RestartController(settings controller.Settings) error {
	return s.RestartControllerWith(settings, nil)
}

// RestartControllerWith stops the NodePool controller, runs between while
// none runs (an upgrade's own steps: the objects as an older release left
// them), and starts it again.
func (s *Stack) RestartControllerWith(settings controller.Settings, between func() error) error {
	return s.restartController(settings, between, nil)
}

// RestartControllerReadingThrough restarts the NodePool controller with its
// manager's client wrapped by wrap: a test makes its cache lag behind the
// API server for chosen objects, as an informer does under load.
func (s *Stack) RestartControllerReadingThrough(settings controller.Settings, wrap func(client.Client) client.Client) error {
	return s.restartController(settings, nil, wrap)
}

func (s *Stack) restartController(settings controller.Settings, between func() error, wrap func(client.Client) client.Client) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopController != nil {
		s.stopController()
		s.stopController = nil
	}
	if between != nil {
		if err := between(); err != nil {
			return err
		}
	}
	stop, err := s.startController(settings, wrap)
	s.stopController = stop
	return err
}

// CutAPIServer takes the API server away from the NodePool controller for
// d: its open connections (watches included) break and new ones are
// refused, as when the API server restarts or the network between them
// fails. Cluster API and the sim keep theirs.
func (s *Stack) CutAPIServer(d time.Duration) { s.apiServer.Cut(d) }

// startController runs the NodePool controller in its own manager, as in
// production (it has its own ClusterCache), until the returned func is
// called. It reaches the API server through s.apiServer, and reads
// through wrap's client when wrap is not nil.
func (s *Stack) startController(settings controller.Settings, wrap func(client.Client) client.Client) (func(), error) {
	skip := true
	cfg := rest.CopyConfig(s.Env.Config)
	cfg.Host = "https://" + s.apiServer.Addr()
	opts := ctrl.Options{
		Scheme: s.Env.Scheme, Cache: controller.CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip},
	}
	if wrap != nil {
		opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.Env.Context())
	if err := controller.Setup(ctx, mgr, settings, ctrlcontroller.Options{MaxConcurrentReconciles: 4}); err != nil {
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

// startSim runs the sim provider in its own manager, as a provider runs.
func (s *Stack) startSim() error {
	return RunSim(s.Env, sim.Options{WorkloadConfig: s.workload, InitialRetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second})
}

// RunSim runs the sim provider with opts in its own manager on env until
// env stops; suites that start their own controller and payload server
// (test/install) use it.
func RunSim(env *harness.Env, opts sim.Options) error {
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: sim.CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return err
	}
	if err := sim.SetupWithManager(env.Context(), mgr, opts); err != nil {
		return err
	}
	env.Run(mgr)
	return nil
}

// ManagementConfig is the management config ConfigMap with the given
// API-server proxy image.
func ManagementConfig(proxyImage string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: inputs.DefaultManagementConfig.Namespace, Name: inputs.DefaultManagementConfig.Name},
		Data:       map[string]string{inputs.ManagementConfigKey: "apiServerProxyImage: " + proxyImage + "\n"},
	}
}

// WriteKubeconfig writes a kubeconfig that reaches the stack's API server
// as an administrator, with namespace as its context's namespace, and
// returns its path (in the stack's temporary folder).
func (s *Stack) WriteKubeconfig(name, namespace string) (string, error) {
	cfg := s.Env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["stack"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["stack"] = &clientcmdapi.Context{Cluster: "stack", AuthInfo: "admin", Namespace: namespace}
	kc.CurrentContext = "stack"
	path := filepath.Join(s.dir, name)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return path, nil
}

// startPayloadServer starts the payload server with s.payloadServer's
// options until the stack stops or it is restarted.
func (s *Stack) startPayloadServer() (*payloadserver.Server, error) {
	srv, err := payloadserver.New(s.payloadServer)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.Env.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Start(ctx)
	}()
	s.stopPayloadServer = func() { cancel(); <-done }
	return srv, nil
}

// RestartPayloadServer stops the payload server and starts a new one on
// the same address, with an empty index: it rebuilds it from the API
// server, as after a crash or a rollout of its Deployment.
func (s *Stack) RestartPayloadServer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopPayloadServer != nil {
		s.stopPayloadServer()
	}
	_, err := s.startPayloadServer()
	return err
}
