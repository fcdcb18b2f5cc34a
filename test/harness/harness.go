package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/capi"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// Options says what to run besides the API server.
type Options struct {
	// WithoutCAPIControllers starts only the API server with the CRDs, for
	// tests of API validation.
	WithoutCAPIControllers bool
	// CRDs are installed besides those of Cluster API, nodepool and the sim provider.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// AddToScheme registers more types on the shared scheme.
	AddToScheme []func(*runtime.Scheme) error
	// AuditLog is a file the API server logs every write to (create,
	// update, patch, delete; one JSON line each, with its user agent and
	// resource), for benchmarks that count writes by client and kind
	// (ReadAudit). Empty: no audit log.
	AuditLog string
}

// CAPIUserAgent is the user agent of the Cluster API controllers' requests.
const CAPIUserAgent = "cluster-api-controllers"

// ClusterAPIUser is the ServiceAccount Cluster API's controllers run as
// once `clusterctl init` installed them; the harness runs them as it.
const ClusterAPIUser = "system:serviceaccount:capi-system:capi-manager"

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Scheme knows client-go, Cluster API v1beta2, nodepool, the sim
	// provider and Options.AddToScheme types.
	Scheme *runtime.Scheme
	// Client is an uncached client: reads see every write at once.
	Client client.Client

	env    *envtest.Environment
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
	// stopped makes Stop once: a second call returns the first's error.
	stopped sync.Once
	stopErr error
}

// Start starts etcd and kube-apiserver, installs the CRDs and, unless told
// otherwise, runs the Cluster API core controllers. Call Stop when done.
func Start(ctx context.Context, opts Options) (*Env, error) {
	logf.SetLogger(testLogger())
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	capiCRDs, err := capi.CRDs()
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme(opts.AddToScheme...)
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  append(capiCRDs, opts.CRDs...),
		CRDDirectoryPaths: []string{
			filepath.Join(root, "config", "crd", "bases"),
			filepath.Join(root, "config", "sim", "crd", "bases"),
		},
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		// kube-apiserver waits for the ClusterCache's open watches on
		// SIGTERM; envtest kills it after this timeout, which is harmless
		// for a throwaway test control plane.
		ControlPlaneStopTimeout: 5 * time.Second,
	}
	if opts.AuditLog != "" {
		if err := configureAudit(env, opts.AuditLog); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	e := &Env{Config: cfg, Scheme: scheme, Client: c, env: env, errs: make(chan error, 16)}
	e.ctx, e.cancel = context.WithCancel(ctx)
	if !opts.WithoutCAPIControllers {
		if err := capi.DisableRateLimiting(); err != nil {
			_ = e.Stop()
			return nil, err
		}
		capiCfg := rest.CopyConfig(cfg)
		capiCfg.UserAgent = CAPIUserAgent
		// As the ServiceAccount `clusterctl init` runs them as, which the
		// shipped admission policies let write what a pool owns.
		capiCfg.Impersonate = rest.ImpersonationConfig{UserName: ClusterAPIUser, Groups: []string{"system:masters", "system:authenticated"}}
		mgr, err := capi.NewManager(e.ctx, capiCfg, capi.Options{Scheme: scheme, Concurrency: 4})
		if err != nil {
			_ = e.Stop()
			return nil, err
		}
		e.Run(mgr)
	}
	return e, nil
}

// Run starts a manager in the background until Stop; a failure to start is
// reported by Stop.
func (e *Env) Run(mgr manager.Manager) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := mgr.Start(e.ctx); err != nil {
			e.errs <- err
		}
	}()
}

// Context ends when the environment stops.
func (e *Env) Context() context.Context { return e.ctx }

// Stop ends the managers, then the API server and etcd. It may be called
// again (a benchmark stops a fleet's control plane early and its cleanup
// stops it too): later calls return the first one's error.
func (e *Env) Stop() error {
	e.stopped.Do(func() { e.stopErr = e.stop() })
	return e.stopErr
}

func (e *Env) stop() error {
	e.cancel()
	e.wg.Wait()
	close(e.errs)
	var errs []error
	for err := range e.errs {
		errs = append(errs, err)
	}
	if err := e.env.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process kube-apiserver to stop") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// NewNamespace creates a namespace with a unique name for one test and
// deletes it when the test ends.
func (e *Env) NewNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// NewScheme knows client-go, Cluster API v1beta2, nodepool and the sim
// provider's types, and those of more.
func NewScheme(more ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{capi.AddToScheme, nodepoolv1.AddToScheme, simv1.AddToScheme}, more...) {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}
