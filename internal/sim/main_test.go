package sim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/harness"
)

// The control plane, the Cluster API controllers, the sim provider and the
// payload server start with the first test that needs them, so unit tests
// run without them.
var (
	envOnce sync.Once
	env     *harness.Env
	ps      *simtest.PayloadServer
	envErr  error
	tmpDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	if tmpDir != "" {
		_ = os.RemoveAll(tmpDir)
	}
	os.Exit(code)
}

func testEnv(t testing.TB) (*harness.Env, *simtest.PayloadServer) {
	t.Helper()
	envOnce.Do(func() {
		env, envErr = harness.Start(context.Background(), harness.Options{})
		if envErr != nil {
			return
		}
		var mgr ctrl.Manager
		mgr, envErr = ctrl.NewManager(env.Config, ctrl.Options{
			Scheme: env.Scheme, Cache: sim.CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"},
		})
		if envErr != nil {
			return
		}
		// Each Cluster reaches its own view of the API server, as a
		// Cluster of a real fleet its own API server.
		if envErr = sim.SetupWithManager(env.Context(), mgr, sim.Options{ClusterViewsAddress: "127.0.0.1:0"}); envErr != nil {
			return
		}
		env.Run(mgr)
		if tmpDir, envErr = os.MkdirTemp("", "sim-test-"); envErr != nil {
			return
		}
		ps, envErr = simtest.StartPayloadServer(env.Context(), env.Config, filepath.Join(tmpDir, "pki"), ctrl.Log.WithName("payload-server"))
	})
	if envErr != nil {
		t.Fatalf("starting the test control plane, sim provider and payload server (set %s to the kube-apiserver and etcd folder): %v", harness.AssetsEnv, envErr)
	}
	return env, ps
}

// eventually polls check every 100ms until it reports done, failing the test
// with check's last description after timeout.
func eventually(t *testing.T, timeout time.Duration, check func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var state string
	for {
		var done bool
		done, state = check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t *testing.T, obj client.Object, namespace, name string) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return err == nil
}

// simNodes returns the Nodes of the SimMachines of a namespace.
func simNodes(t *testing.T, namespace string) []corev1.Node {
	t.Helper()
	list := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if strings.HasPrefix(n.Spec.ProviderID, simv1.ProviderIDPrefix+namespace+"/") {
			out = append(out, n)
		}
	}
	return out
}

// running waits until the MachineDeployment md has exactly n Machines, none
// in exclude, each on dataSecret with a nodeRef to a Ready Node that carries
// want's node labels, its payload hash and the Machine's version, and the
// namespace has no other simulated Node. It returns the Machines' UIDs.
func running(t *testing.T, namespace, md string, n int, want *simtest.Boot, exclude sets.Set[string]) sets.Set[string] {
	t.Helper()
	var uids sets.Set[string]
	eventually(t, 3*time.Minute, func() (bool, string) {
		machines := &clusterv1.MachineList{}
		if err := env.Client.List(context.Background(), machines, client.InNamespace(namespace),
			client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
			t.Fatal(err)
		}
		uids = sets.New[string]()
		if len(machines.Items) != n {
			return false, fmt.Sprintf("%d Machines, want %d", len(machines.Items), n)
		}
		for _, m := range machines.Items {
			uids.Insert(string(m.UID))
			if exclude.Has(string(m.UID)) {
				return false, fmt.Sprintf("Machine %s is not replaced yet", m.Name)
			}
			if got := ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""); got != want.UserData {
				return false, fmt.Sprintf("Machine %s boots from %s, want %s", m.Name, got, want.UserData)
			}
			if !m.Status.NodeRef.IsDefined() {
				return false, fmt.Sprintf("Machine %s has no nodeRef yet (phase %s)", m.Name, m.Status.Phase)
			}
			node := &corev1.Node{}
			if !get(t, node, "", m.Status.NodeRef.Name) {
				return false, fmt.Sprintf("Node %s of Machine %s does not exist", m.Status.NodeRef.Name, m.Name)
			}
			if err := checkNode(node, &m, want); err != nil {
				t.Fatalf("Node %s of Machine %s: %v", node.Name, m.Name, err)
			}
		}
		if nodes := simNodes(t, namespace); len(nodes) != n {
			return false, fmt.Sprintf("%d simulated Nodes in the namespace, want %d", len(nodes), n)
		}
		return true, ""
	})
	return uids
}

// checkNode checks what a Node says about the payload it booted and the
// Machine it belongs to.
func checkNode(node *corev1.Node, m *clusterv1.Machine, want *simtest.Boot) error {
	for k, v := range want.NodeLabels() {
		if node.Labels[k] != v {
			return fmt.Errorf("label %s=%q, want %q (labels %v)", k, node.Labels[k], v, node.Labels)
		}
	}
	if got := node.Annotations[nodepoolv1.AnnotationBootedPayload]; got != want.Payload.Hash {
		return fmt.Errorf("annotation %s=%q, want %q", nodepoolv1.AnnotationBootedPayload, got, want.Payload.Hash)
	}
	if node.Spec.ProviderID != m.Spec.ProviderID {
		return fmt.Errorf("providerID %q, Machine's %q", node.Spec.ProviderID, m.Spec.ProviderID)
	}
	if node.Status.NodeInfo.KubeletVersion != m.Spec.Version {
		return fmt.Errorf("kubelet version %q, Machine's %q", node.Status.NodeInfo.KubeletVersion, m.Spec.Version)
	}
	for _, c := range node.Status.Conditions {
		want := corev1.ConditionFalse
		if c.Type == corev1.NodeReady {
			want = corev1.ConditionTrue
		}
		if c.Status != want {
			return fmt.Errorf("condition %s is %s, want %s", c.Type, c.Status, want)
		}
	}
	return nil
}

// simMachine returns the SimMachine of the only Machine of md, or nil.
func simMachine(t *testing.T, namespace, md string) (*clusterv1.Machine, *simv1.SimMachine) {
	t.Helper()
	machines := &clusterv1.MachineList{}
	if err := env.Client.List(context.Background(), machines, client.InNamespace(namespace),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
		t.Fatal(err)
	}
	if len(machines.Items) != 1 {
		return nil, nil
	}
	m := &machines.Items[0]
	sm := &simv1.SimMachine{}
	if !get(t, sm, namespace, m.Spec.InfrastructureRef.Name) {
		return m, nil
	}
	return m, sm
}

// waitForBooted waits until the only SimMachine of md has Booted with the
// given reason and a message containing each of contains, and returns it.
func waitForBooted(t *testing.T, namespace, md, reason string, contains ...string) *simv1.SimMachine {
	t.Helper()
	var out *simv1.SimMachine
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, sm := simMachine(t, namespace, md)
		if sm == nil {
			return false, "no SimMachine yet"
		}
		c := conditions.Get(sm, simv1.ConditionBooted)
		if c == nil || c.Reason != reason {
			return false, fmt.Sprintf("SimMachine %s: Booted is %+v, want reason %s", sm.Name, c, reason)
		}
		for _, s := range contains {
			if !strings.Contains(c.Message, s) {
				return false, fmt.Sprintf("SimMachine %s: Booted message %q lacks %q", sm.Name, c.Message, s)
			}
		}
		out = sm
		return true, ""
	})
	return out
}

// setup creates a namespace with a Cluster "c1" and a SimMachineTemplate
// "workers" of spec.
func setup(t *testing.T, spec simv1.SimMachineSpec) string {
	t.Helper()
	env, _ := testEnv(t)
	ns := env.NewNamespace(t)
	ctx := context.Background()
	if _, err := simtest.CreateCluster(ctx, env.Client, ns, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := simtest.CreateMachineTemplate(ctx, env.Client, ns, "workers", spec); err != nil {
		t.Fatal(err)
	}
	return ns
}

func scale(t *testing.T, namespace, name string, replicas int32) {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	get(t, md, namespace, name)
	before := md.DeepCopy()
	md.Spec.Replicas = ptr.To(replicas)
	if err := env.Client.Patch(context.Background(), md, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

func annotate(t *testing.T, obj client.Object, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
