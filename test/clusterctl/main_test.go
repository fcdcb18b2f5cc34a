package clusterctl

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"nodepool.dev/nodepool/internal/capi"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/process"
	"nodepool.dev/nodepool/test/stack"
)

// What the test installs: nodepool's add-on provider at providerVersion,
// with the clusterctl variable NODEPOOL_NAMESPACE set (so every mention of
// the namespace must follow it), running image (the repository's; a
// release's is pinned by digest, and clusterctl's images: setting moves it:
// hack/internal/dist tests that).
const (
	systemNamespace = "nodepool-capi"
	image           = "registry.example/nodepool:v0.1.0"
	providerVersion = "v0.1.0"
	controllerName  = "nodepool-controller"
	payloadName     = "nodepool-payload-server"
	// timeout bounds every wait: generous, the machine is shared.
	timeout = 4 * time.Minute
)

var (
	env *harness.Env
	// binary is the nodepool binary the replicas run.
	binary string
	// ctl is clusterctl's configuration: the local repositories.
	ctl *stack.Clusterctl
	// service stands in for the payload server Service.
	service *stack.Forwarder
	// serviceHost is host:port of that Service once installed (a string).
	serviceHost atomic.Value
	tmp         string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if tmp, err = os.MkdirTemp("", "nodepool-clusterctl-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	return process.RunSuite(m, "test/clusterctl", &env, setup, func() {
		for _, r := range replicas {
			r.Stop()
		}
		service.Close()
	})
}

func setup() error {
	ctx := context.Background()
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	// The binary builds while the control plane starts.
	binary = filepath.Join(tmp, "nodepool")
	if err := process.BuildWhile(root, binary, func() (err error) {
		env, err = harness.Start(ctx, harness.Options{
			WithoutCAPIControllers: true,
			CRDs:                   certManagerCRDs(),
			AddToScheme:            []func(*runtime.Scheme) error{sim.AddToScheme},
		})
		return err
	}); err != nil {
		return err
	}
	// Cluster API's controllers, as the ServiceAccount clusterctl init
	// runs them as.
	if err := capi.DisableRateLimiting(); err != nil {
		return err
	}
	capiConfig := rest.CopyConfig(env.Config)
	capiConfig.Impersonate = rest.ImpersonationConfig{UserName: stack.ClusterAPIUser, Groups: []string{"system:masters", "system:authenticated"}}
	mgr, err := capi.NewManager(env.Context(), capiConfig, capi.Options{Scheme: env.Scheme, Concurrency: 4})
	if err != nil {
		return err
	}
	env.Run(mgr)

	ctl, err = stack.WriteClusterctl(root, filepath.Join(tmp, "clusterctl"), providerVersion, image, env.Config,
		map[string]string{"NODEPOOL_NAMESPACE": systemNamespace})
	if err != nil {
		return err
	}
	if service, err = stack.NewForwarder(); err != nil {
		return err
	}
	// The sim's machines resolve the Service's DNS name to the forwarder.
	dial := service.DialAs(func() string { host, _ := serviceHost.Load().(string); return host })
	return stack.RunSim(env, sim.Options{InitialRetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second, DialPayloadServer: dial})
}

var (
	installOnce sync.Once
	installErr  error
	replicas    []*process.Replica
)

// install runs `clusterctl init --addon nodepool` once for the suite, then
// one replica of each Deployment it applied; a test that needs nodepool
// running calls it first.
func install(t *testing.T) {
	t.Helper()
	installOnce.Do(func() { installErr = initAddon(context.Background(), t) })
	if installErr != nil {
		t.Fatal(installErr)
	}
	checkReplicas(t)
}

func initAddon(ctx context.Context, t *testing.T) error {
	if err := ctl.RecordClusterAPI(ctx); err != nil {
		return fmt.Errorf("recording Cluster API in clusterctl's inventory: %w", err)
	}
	c, err := ctl.Client(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := c.Init(ctx, clusterctlclient.InitOptions{
		Kubeconfig:     clusterctlclient.Kubeconfig{Path: ctl.Kubeconfig},
		AddonProviders: []string{"nodepool:" + providerVersion},
	}); err != nil {
		return fmt.Errorf("clusterctl init --addon nodepool: %w", err)
	}
	t.Logf("clusterctl init --addon nodepool:%s took %s", providerVersion, time.Since(start).Round(time.Millisecond))

	// What cert-manager and the cluster would do next.
	if n, err := issueCertificates(ctx, env.Client, systemNamespace); err != nil || n != 1 {
		return fmt.Errorf("issuing the serving certificate: %d issued, %v", n, err)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: inputs.DefaultManagementConfig.Name},
		Data:       map[string]string{inputs.ManagementConfigKey: "apiServerProxyImage: registry.example/haproxy@sha256:" + fmt.Sprintf("%064d", 1) + "\n"},
	}); err != nil {
		return err
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: systemNamespace, Name: payloadName}, svc); err != nil {
		return err
	}
	serviceHost.Store(net.JoinHostPort(svc.Name+"."+svc.Namespace+".svc", fmt.Sprint(svc.Spec.Ports[0].Port)))
	// The controller first: a payload server reading the controller's
	// mirrors is ready once the controller has mirrored every pool.
	for _, name := range []string{controllerName, payloadName} {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: systemNamespace, Name: name}, d); err != nil {
			return err
		}
		// One replica of each, as clusterctl applied it (test/process says
		// what stands in for the pod), ready once its readiness probe is.
		r, err := process.Start(ctx, d, process.Options{Binary: binary, Config: env.Config, Dir: filepath.Join(tmp, d.Name)})
		if err != nil {
			return err
		}
		replicas = append(replicas, r)
		if err := r.WaitReady(d.Spec.Template.Spec.Containers[0].ReadinessProbe, 3*time.Minute); err != nil {
			return err
		}
		if name == payloadName {
			service.SetBackends(r.Addrs["https"])
		}
	}
	return nil
}

// checkReplicas fails the test if a replica exited or was refused.
func checkReplicas(t testing.TB) {
	t.Helper()
	for _, r := range replicas {
		if err := r.Problem(); err != nil {
			t.Fatal(err)
		}
	}
}
