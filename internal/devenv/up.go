package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/capi"
	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/k8sbin"
	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/sim"
)

// stopTimeout bounds how long the in-process controllers and the payload
// server take to stop before the API server is stopped anyway. They take
// about a second, except when a Cluster API ClusterCache worker is stuck
// sending an event to a controller that has already stopped (Cluster API
// v1.14 sends on an unbuffered channel without a context); waiting longer
// would not free it, and the process ends right after.
const stopTimeout = 5 * time.Second

// UpOptions configure `nodepool dev up`. Every setting of the NodePool
// controller, the payload server and the sim provider is here, so a person
// can watch in minutes what takes hours in production.
type UpOptions struct {
	// DataDir keeps etcd's data, the certificates, the kubeconfig and the
	// logs; a second run on it resumes.
	DataDir string
	// AssetsDir holds kube-apiserver and etcd; empty means bin/k8s/<versions>,
	// built by hack/tools/build-control-plane.sh when missing.
	AssetsDir string
	// Ports on 127.0.0.1.
	APIServerPort, EtcdPort, EtcdPeerPort, PayloadServerPort int

	// Controller settings; the payload server URL and CA and the renderer
	// version are set by Up.
	Controller            controller.Settings
	ControllerConcurrency int
	// ControllerMetricsAddress serves the controller's Prometheus metrics;
	// "0" disables it.
	ControllerMetricsAddress string

	// PayloadServer timeouts, header limit and probe address; the API
	// server, address and certificate are set by Up.
	PayloadServer payloadserver.Options

	// Sim provider options: boot and update delays, fetch timeout and retries, concurrency.
	Sim sim.Options

	// CAPIConcurrency is the concurrency of each Cluster API reconciler.
	CAPIConcurrency int

	// APIServerProxyImage is written to the management config when it is
	// created (a resumed environment keeps what it has).
	APIServerProxyImage string

	// StatusInterval is how often the terminal status looks at the pools.
	StatusInterval time.Duration

	// Log configures the log file <data-dir>/nodepool.log.
	Log zap.Options
}

// env is a running dev environment.
type env struct {
	opts    UpOptions
	dataDir string
	out     io.Writer
	log     logr.Logger
	cp      *controlPlane
	client  client.Client
	payload *payloadserver.Server
	// payloadURL is where machines fetch their payload.
	payloadURL string

	managers []manager.Manager
	wg       sync.WaitGroup
	errs     chan error
}

// Up runs the dev environment until ctx ends, printing a short status to
// out (logs go to <data-dir>/nodepool.log), then stops it cleanly.
func Up(ctx context.Context, o UpOptions, out io.Writer) (retErr error) {
	started := time.Now()
	defer func() {
		// Ctrl-C while starting: whatever failed then failed because of it.
		if retErr != nil && ctx.Err() != nil {
			retErr = nil
		}
		if retErr == nil {
			fmt.Fprintln(out, "stopped; run the same command again to resume")
		}
	}()
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("creating the data dir: %w", err)
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	_, statErr := os.Stat(filepath.Join(dataDir, "etcd"))
	resuming := statErr == nil

	logPath := filepath.Join(dataDir, "nodepool.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the log file: %w", err)
	}
	defer logFile.Close()
	o.Log.DestWriter = logFile
	if o.Log.TimeEncoder == nil {
		o.Log.TimeEncoder = zapcore.ISO8601TimeEncoder
	}
	logOpts := []zap.Opts{zap.UseFlagOptions(&o.Log)}
	if o.Log.NewEncoder == nil {
		logOpts = append(logOpts, zap.ConsoleEncoder())
	}
	log := zap.New(logOpts...)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	e := &env{opts: o, dataDir: dataDir, out: out, log: log.WithName("dev"), errs: make(chan error, 8)}

	fmt.Fprintf(out, "nodepool dev environment in %s (logs: %s)\n", rel(dataDir), rel(logPath))
	binDir := o.AssetsDir
	if binDir == "" {
		if binDir, err = k8sbin.Dir(os.Stderr); err != nil {
			return err
		}
	}
	e.cp, err = startControlPlane(ctx, controlPlaneOptions{
		out: out, binDir: binDir, dataDir: dataDir,
		apiServerPort: o.APIServerPort, etcdPort: o.EtcdPort, etcdPeerPort: o.EtcdPeerPort,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := e.cp.stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	fmt.Fprintf(out, "  etcd            127.0.0.1:%d (data %s)\n", o.EtcdPort, rel(filepath.Join(dataDir, "etcd")))
	fmt.Fprintf(out, "  kube-apiserver  %s (binaries in %s)\n", e.cp.config.Host, rel(binDir))
	kubeconfig := filepath.Join(dataDir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, e.cp.config); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{capi.AddToScheme, nodepoolv1.AddToScheme, sim.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	if err := installCRDs(ctx, e.cp.config); err != nil {
		return fmt.Errorf("installing the CRDs of Cluster API, nodepool and the sim provider: %w", err)
	}
	if e.client, err = client.New(e.cp.config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := installPolicies(ctx, e.client); err != nil { // policies.go
		return fmt.Errorf("installing the admission policies: %w", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer e.stop(cancel)
	if err := e.startPayloadServer(runCtx); err != nil {
		return err
	}
	if err := e.startControllers(runCtx, scheme); err != nil {
		return err
	}
	if err := e.seed(ctx); err != nil {
		return err
	}
	if err := e.waitReady(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "  payload server  %s\n", e.payloadURL)
	fmt.Fprintf(out, "  in process      Cluster API core controllers, nodepool controller, sim provider (boot delay %s, update delay %s)\n", o.Sim.BootDelay, o.Sim.UpdateDelay)
	fmt.Fprintf(out, "  namespace %s   Cluster %s (SimControlPlane, Secret %s-kubeconfig), SimMachineTemplate %s\n", devNamespace, devCluster, devCluster, devTemplate)
	fmt.Fprintf(out, "  platform        ConfigMap %s\n", inputs.DefaultManagementConfig)
	resumed := ""
	if resuming {
		resumed = " (resumed: " + e.inventory(ctx) + ")"
	}
	fmt.Fprintf(out, "ready in %.1fs%s\n", time.Since(started).Seconds(), resumed)
	fmt.Fprintf(out, `
Next, in another terminal:
  export KUBECONFIG=%s
  kubectl apply -f config/samples/      # from a checkout: a NodePool of 3 in namespace %s
  kubectl get nodepools,machines,nodes -L nodepool.dev/payload
  nodepool dev demo                     # the guided tour (make demo in a checkout)
Ctrl-C stops everything; the same command resumes where it stopped.

`, kubeconfig, devNamespace)
	return e.watch(ctx)
}

// startPayloadServer serves payloads on 127.0.0.1 with a certificate of
// the dev payload server CA, which is kept in the data dir so the CA that
// user-data pins stays the same across restarts.
func (e *env) startPayloadServer(ctx context.Context) error {
	pki := filepath.Join(e.dataDir, "pki")
	ca, err := loadOrCreateCA(pki, "payload-ca", "nodepool dev payload server CA")
	if err != nil {
		return err
	}
	certFile, keyFile, err := ca.issueFiles(pki, "payload-server", leaf{commonName: "nodepool-payload-server", hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return err
	}
	o := e.opts.PayloadServer
	o.Config = as(e.cp.config, payloadServerUser)
	o.Address = net.JoinHostPort("127.0.0.1", strconv.Itoa(e.opts.PayloadServerPort))
	o.CertFile, o.KeyFile = certFile, keyFile
	o.Logger = ctrl.Log.WithName("payload-server")
	if e.payload, err = payloadserver.New(o); err != nil {
		return fmt.Errorf("%w (pass another --payload-server-port if the port is taken)", err)
	}
	u := url.URL{Scheme: "https", Host: e.payload.Addr().String(), Path: payloadserver.IgnitionPath}
	e.payloadURL = u.String()
	e.opts.Controller.Inputs.PayloadServerURL = e.payloadURL
	e.opts.Controller.Inputs.PayloadServerCA = ca.pem
	e.run(ctx, "payload server", e.payload.Start)
	return nil
}

// startControllers runs the Cluster API core controllers, the NodePool
// controller and the sim provider, each in its own manager as they run in
// production.
func (e *env) startControllers(ctx context.Context, scheme *runtime.Scheme) error {
	if err := capi.DisableRateLimiting(); err != nil {
		return err
	}
	capiMgr, err := capi.NewManager(ctx, as(e.cp.config, clusterAPIUser), capi.Options{Scheme: scheme, Concurrency: e.opts.CAPIConcurrency})
	if err != nil {
		return err
	}
	skip := true
	newManager := func(cfg *rest.Config, cache func() ctrl.Options, metrics string) (manager.Manager, error) {
		o := cache()
		o.Scheme = scheme
		o.Metrics = metricsserver.Options{BindAddress: metrics}
		o.HealthProbeBindAddress = "0"
		o.Controller = config.Controller{SkipNameValidation: &skip}
		return ctrl.NewManager(rest.CopyConfig(cfg), o)
	}
	ctrlMgr, err := newManager(as(e.cp.config, controllerUser), func() ctrl.Options { return ctrl.Options{Cache: controller.CacheOptions()} }, e.opts.ControllerMetricsAddress)
	if err != nil {
		return fmt.Errorf("creating the NodePool controller's manager: %w", err)
	}
	settings := e.opts.Controller
	settings.Inputs.RendererVersion = controller.Version
	if err := controller.Setup(ctx, ctrlMgr, settings, ctrlcontroller.Options{MaxConcurrentReconciles: e.opts.ControllerConcurrency}); err != nil {
		return fmt.Errorf("setting up the NodePool controller: %w", err)
	}
	simMgr, err := newManager(e.cp.config, func() ctrl.Options { return ctrl.Options{Cache: sim.CacheOptions()} }, "0")
	if err != nil {
		return fmt.Errorf("creating the sim provider's manager: %w", err)
	}
	if err := sim.SetupWithManager(ctx, simMgr, e.opts.Sim); err != nil {
		return err
	}
	for name, mgr := range map[string]manager.Manager{"Cluster API controllers": capiMgr, "NodePool controller": ctrlMgr, "sim provider": simMgr} {
		e.managers = append(e.managers, mgr)
		e.run(ctx, name, mgr.Start)
	}
	return nil
}

// run runs start in the background until ctx ends; an error (or an early
// return) is reported on e.errs.
func (e *env) run(ctx context.Context, name string, start func(context.Context) error) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		err := start(ctx)
		if ctx.Err() != nil {
			if err != nil {
				e.log.Error(err, "stopped with an error", "component", name)
			}
			return
		}
		if err == nil {
			err = errors.New("stopped unexpectedly")
		}
		e.errs <- fmt.Errorf("%s: %w (see the log)", name, err)
	}()
}

// waitReady waits for the caches of every manager, the payload server's
// index and the dev cluster's control plane.
func (e *env) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, mgr := range e.managers {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return e.notReady(ctx, "the controllers' caches did not sync")
		}
	}
	for !e.payload.Ready() || !e.clusterReady(ctx) {
		select {
		case err := <-e.errs:
			return err
		case <-ctx.Done():
			return e.notReady(ctx, fmt.Sprintf("the payload server (ready: %t) or the SimControlPlane %s/%s is not ready", e.payload.Ready(), devNamespace, devCluster))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func (e *env) notReady(ctx context.Context, what string) error {
	select {
	case err := <-e.errs:
		return err
	default:
	}
	if err := e.cp.failed(); err != nil {
		return err
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	return fmt.Errorf("%s within 2 minutes; see %s", what, rel(filepath.Join(e.dataDir, "nodepool.log")))
}

// stop ends the controllers and the payload server and waits for them,
// before the API server and etcd are stopped.
func (e *env) stop(cancel context.CancelFunc) {
	cancel()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		e.log.Info("some controllers did not stop in time (a Cluster API ClusterCache worker blocked at shutdown); stopping the API server anyway", "timeout", stopTimeout)
	}
}

// rel shortens a path under the working directory.
func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && len(r) < len(path) && !startsWithDotDot(r) {
		return r
	}
	return path
}

func startsWithDotDot(p string) bool {
	return p == ".." || len(p) > 2 && p[:3] == ".."+string(filepath.Separator)
}
