package move

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/secrets"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/userdata"
	"nodepool.dev/nodepool/test/stack"
)

const timeout = 3 * time.Minute

func TestAPausedClusterGetsNoWriteFromTheControllerAndThePoolSaysWhy(t *testing.T) {
	ctx := context.Background()
	p := src.NewPool(t, "paused", 1)
	src.WaitForPool(t, p, timeout, "1 ready node", stack.PoolSettled(1))
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: stack.ClusterName}}
	setPaused(t, src, cluster, true)
	st := src.WaitForPool(t, p, timeout, "ReconciliationActive=False ClusterPaused", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionReconciliationActive)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonClusterPaused
	})
	observed := st.Pool.Status.ObservedGeneration
	md := &clusterv1.MachineDeployment{}
	if err := src.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), md); err != nil {
		t.Fatal(err)
	}
	secretsBefore := secretVersions(t, src, p)
	stack.Update(t, src.Env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To(int32(2)) })

	out, code := kubectlNodepool(srcKubeconfig, p.Namespace, "rollout", "status", p.Name, "--watch=false")
	if code != 0 || !strings.Contains(out, "Paused") || !strings.Contains(out, "spec.paused") {
		t.Errorf("kubectl nodepool rollout status of a pool whose Cluster is paused (exit %d) does not say so:\n%s", code, out)
	}
	src.HoldsFor(t, p, 10*time.Second, "nothing written while the Cluster is paused", func(s stack.PoolState) bool {
		got := &clusterv1.MachineDeployment{}
		if err := src.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		return got.ResourceVersion == md.ResourceVersion && s.Pool.Status.ObservedGeneration == observed &&
			secretVersions(t, src, p) == secretsBefore && s.Machines.Len() == 1
	})

	setPaused(t, src, cluster, false)
	src.WaitForPool(t, p, timeout, "the scale-up made once the Cluster is resumed", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && stack.IsTrue(s.Pool, nodepoolv1.ConditionReconciliationActive)
	})
}

func TestClusterctlMoveCarriesAPoolAndItsHistoryAndNothingRolls(t *testing.T) {
	ctx := context.Background()
	// The owner's inputs are not the pool's objects: like any object
	// outside a Cluster's hierarchy, clusterctl moves them when they carry
	// its move label.
	p := src.NewPoolWith(t, "workers", 2, func(ns string, p *nodepoolv1.NodePool) {
		labelForMove(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chrony"}})
		labelForMove(t, &simv1.SimMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small"}})
		p.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
	})
	t.Cleanup(func() {
		_ = dst.Env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})
	})
	first := src.WaitForPool(t, p, timeout, "2 ready nodes", stack.PoolSettled(2))
	// A second rollout, so the history has more than the pool's first record.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "chrony"}}
	stack.Update(t, src.Env.Client, cm, func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("time2.corp.example") })
	src.WaitForPool(t, p, timeout, "the config rolled out", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Intersection(first.Machines).Len() == 0
	})
	src.LastRecord(t, p, "spec", history.OutcomeComplete)

	// A settled pool: the first rollout's Secrets are cleaned up (after the
	// grace period). clusterctl move reads every object it finds before it
	// pauses the Cluster, and fails on one deleted in between.
	first0 := src.HistoryOf(t, p)[0]
	stack.WaitFor(t, timeout, "the first rollout's Secrets cleaned up", func() []string {
		var left []string
		for _, name := range []string{secrets.UserDataSecretName(p.Name, first0.RolloutHash), secrets.TokenSecretName(p.Name, first0.RolloutHash), secrets.PayloadSecretName(p.Name, first0.PayloadHash)} {
			if err := src.Env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
				left = append(left, name)
			}
		}
		return left
	}, func(left []string) bool { return len(left) == 0 }, func(left []string) string { return strings.Join(left, ", ") })

	// What the pool is before the move.
	before := machinesOf(t, src, p)
	if before.withNodes() != 2 {
		t.Fatalf("before the move: %s", before)
	}
	pool := &nodepoolv1.NodePool{}
	if err := src.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), pool); err != nil {
		t.Fatal(err)
	}
	records := src.HistoryOf(t, p)
	tokens := tokensOf(t, src, p)
	md := &clusterv1.MachineDeployment{}
	if err := src.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), md); err != nil {
		t.Fatal(err)
	}
	historyOut, code := kubectlNodepool(srcKubeconfig, p.Namespace, "rollout", "history", p.Name)
	if code != 0 {
		t.Fatalf("rollout history before the move: exit %d\n%s", code, historyOut)
	}
	// The archive is written once the cache shows the records.
	stack.WaitFor(t, timeout, "the history archive holding every record", func() int {
		s := &corev1.Secret{}
		if err := src.Env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: history.ArchiveName(p.Name)}, s); err != nil {
			return -1
		}
		crs, err := history.Unarchive(s, p.Name)
		if err != nil {
			return -1
		}
		return len(crs)
	}, func(n int) bool { return n == len(records) }, func(n int) string { return fmt.Sprintf("%d records archived of %d", n, len(records)) })

	// The token binding key goes to the target first (docs/operations.md,
	// before moving), so the moved token Secrets verify there.
	copyTokenKey(t, src, dst)
	moveStarted := time.Now()
	cfg, err := clusterctlconfig.New(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := clusterctl.New(ctx, "", clusterctl.InjectConfig(cfg), clusterctl.InjectClusterClientFactory(stack.ClusterctlClientFactory(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: srcKubeconfig},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: dstKubeconfig},
		Namespace:      p.Namespace,
	}); err != nil {
		t.Fatalf("clusterctl move: %v", err)
	}
	t.Logf("clusterctl move took %s", time.Since(moveStarted).Round(time.Millisecond))

	// The source keeps nothing of the pool.
	if err := src.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{}); !apierrors.IsNotFound(err) {
		t.Errorf("the NodePool is still on the source: %v", err)
	}
	left := &corev1.SecretList{}
	if err := src.Env.Client.List(ctx, left, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) > 0 {
		t.Errorf("%d of the pool's Secrets are left on the source", len(left.Items))
	}

	// The target has it all, and rolls nothing.
	moved := &nodepoolv1.NodePool{}
	stack.WaitFor(t, timeout, "the moved pool settled on the target, with its machines and nodes", func() fleet {
		if err := dst.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), moved); err != nil {
			return nil
		}
		return machinesOf(t, dst, p)
	}, func(f fleet) bool {
		return stack.Settled(moved, 2) && stack.IsTrue(moved, nodepoolv1.ConditionReconciliationActive) && f.String() == before.String()
	}, func(f fleet) string {
		return fmt.Sprintf("machines %s (before: %s); conditions: %s\nmachines on the target:\n%s", f, before, stack.Conditions(moved), machineConditions(t, dst, p))
	})
	dst.HoldsFor(t, p, 15*time.Second, "nothing rolls on the target", func(s stack.PoolState) bool {
		return machinesOf(t, dst, p).String() == before.String() && s.Pool.Status.Updating == ""
	})
	for _, a := range []string{nodepoolv1.AnnotationCurrentRolloutConfig, nodepoolv1.AnnotationCurrentPayload} {
		if moved.Annotations[a] != pool.Annotations[a] {
			t.Errorf("annotation %s: %q on the source, %q on the target", a, pool.Annotations[a], moved.Annotations[a])
		}
	}
	if !hasOwner(moved.OwnerReferences, "Cluster", stack.ClusterName) {
		t.Errorf("the moved pool is not owned by its Cluster: %+v", moved.OwnerReferences)
	}
	movedMD := &clusterv1.MachineDeployment{}
	if err := dst.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), movedMD); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(movedMD, moved) || ptr.Deref(movedMD.Spec.Template.Spec.Bootstrap.DataSecretName, "") != ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "") {
		t.Errorf("the moved MachineDeployment: controlled by the pool %v, user-data %q (was %q)", metav1.IsControlledBy(movedMD, moved),
			ptr.Deref(movedMD.Spec.Template.Spec.Bootstrap.DataSecretName, ""), ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, ""))
	}
	// The clone's record of its source follows the moved template (a new
	// UID): what a provider changes in it later stays pinned.
	movedTemplate := &simv1.SimMachineTemplate{}
	if err := dst.Env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: "small"}, movedTemplate); err != nil {
		t.Fatalf("the pool's template did not move: %v", err)
	}
	stack.WaitFor(t, timeout, "the clone recording the moved template", func() string {
		clone := &simv1.SimMachineTemplate{}
		if err := dst.Env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: movedMD.Spec.Template.Spec.InfrastructureRef.Name}, clone); err != nil {
			return err.Error()
		}
		return clone.Labels[nodepoolv1.LabelTemplateSourceUID] + "@" + clone.Labels[nodepoolv1.LabelTemplateSourceGeneration]
	}, func(s string) bool {
		return s == fmt.Sprintf("%s@%d", movedTemplate.UID, movedTemplate.Generation)
	}, func(s string) string { return s + ", want " + string(movedTemplate.UID) })
	mhc := &clusterv1.MachineHealthCheck{}
	if err := dst.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), mhc); err != nil || !metav1.IsControlledBy(mhc, moved) {
		t.Errorf("the pool's MachineHealthCheck on the target: %v, controlled by the pool: %v", err, err == nil && metav1.IsControlledBy(mhc, moved))
	}

	// The history, record for record, and the plugin shows it.
	got := dst.HistoryOf(t, p)
	if fmt.Sprint(summary(got)) != fmt.Sprint(summary(records)) {
		t.Errorf("history on the target:\n%v\non the source:\n%v", summary(got), summary(records))
	}
	out, code := kubectlNodepool(dstKubeconfig, p.Namespace, "rollout", "history", p.Name)
	if code != 0 || firstColumns(out) != firstColumns(historyOut) {
		t.Errorf("rollout history on the target (exit %d):\n%s\non the source:\n%s", code, out, historyOut)
	}

	// The moved tokens, unchanged, are served by the target's payload server.
	if got := tokensOf(t, dst, p); fmt.Sprint(got) != fmt.Sprint(tokens) {
		t.Errorf("the token Secrets changed in the move: %d on the target, %d on the source (or their tokens differ)", len(got), len(tokens))
	}
	fetchThroughUserData(t, movedMD)

	// A scale-up on the target boots what the running nodes run, with the
	// target's payload server.
	stack.Update(t, dst.Env.Client, moved, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To(int32(3)) })
	var grown fleet
	stack.WaitFor(t, timeout, "a third machine with its node, the first two kept", func() fleet {
		grown = machinesOf(t, dst, p)
		return grown
	}, func(f fleet) bool {
		if f.withNodes() != 3 {
			return false
		}
		for m, n := range before {
			if f[m] != n {
				return false
			}
		}
		return true
	}, func(f fleet) string { return f.String() })
	checkNewNodeBootsThePinnedPayload(t, p, pool.Annotations[nodepoolv1.AnnotationCurrentPayload], grown, before)
}

// checkNewNodeBootsThePinnedPayload checks that the node added on the
// target booted the pinned payload's pinned components: only fresh
// components (the payload server, now the target's) may differ.
func checkNewNodeBootsThePinnedPayload(t *testing.T, p *nodepoolv1.NodePool, pinned string, grown, before fleet) {
	t.Helper()
	ctx := context.Background()
	var added string
	for m, n := range grown {
		if _, ok := before[m]; !ok {
			added = strings.SplitN(n, "/", 2)[0]
		}
	}
	node := &corev1.Node{}
	if err := src.Env.Client.Get(ctx, client.ObjectKey{Name: added}, node); err != nil {
		t.Fatal(err)
	}
	booted := node.Annotations[nodepoolv1.AnnotationBootedPayload]
	manifestOf := func(hash string) map[string]string {
		s := &corev1.Secret{}
		if err := dst.Env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: secrets.PayloadSecretName(p.Name, hash)}, s); err != nil {
			t.Fatalf("payload %s on the target: %v", hash, err)
		}
		_, _, m, err := secrets.PayloadIdentity(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	want, have := manifestOf(pinned), manifestOf(booted)
	for _, c := range inputs.Components() {
		if c.Delivery() == inputs.DeliveryFresh || c.IsRollout() {
			continue
		}
		if want[c.String()] != have[c.String()] {
			t.Errorf("the node added after the move booted %s %s, the running nodes' pinned payload has %s", c, have[c.String()], want[c.String()])
		}
	}
	for _, c := range inputs.Components() {
		if c.IsRollout() && want[c.String()] != have[c.String()] {
			t.Errorf("the node added after the move booted another %s (%s, pinned %s): that is a rollout", c, have[c.String()], want[c.String()])
		}
	}
}

// fetchThroughUserData fetches the payload as a machine of md would: the
// user-data Secret it references (the target's controller points it at the
// target's payload server) with the moved token, over HTTPS.
func fetchThroughUserData(t *testing.T, md *clusterv1.MachineDeployment) {
	t.Helper()
	s := &corev1.Secret{}
	name := ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	stack.WaitFor(t, timeout, "the user-data pointing at the target's payload server", func() string {
		if err := dst.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: md.Namespace, Name: name}, s); err != nil {
			return err.Error()
		}
		ptr, err := userdata.Parse(s.Data["value"])
		if err != nil {
			return err.Error()
		}
		return ptr.URL.String()
	}, func(u string) bool {
		return strings.HasPrefix(u, dst.Settings.Inputs.PayloadServerURL)
	}, func(u string) string { return u + " (want " + dst.Settings.Inputs.PayloadServerURL + ")" })
	ptr, err := userdata.Parse(s.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, ptr.URL.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = ptr.Headers.Clone()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(ptr)}}
	var status int
	var body []byte
	stack.WaitFor(t, timeout, "the target's payload server serving the moved token", func() int {
		resp, err := hc.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		status = resp.StatusCode
		return status
	}, func(c int) bool { return c == http.StatusOK }, func(c int) string { return fmt.Sprintf("HTTP %d", c) })
	if err := ptr.Verify(body); err != nil {
		t.Errorf("the payload served does not verify: %v", err)
	}
}

// summary is what a move must keep of each record.
func summary(es []history.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("r%d %s %s %s %s started %s", e.Revision, e.Initiator, e.RolloutHash, e.PayloadHash, e.Outcome, e.Started.UTC().Format(time.RFC3339)))
	}
	return out
}

// firstColumns drops the columns of relative times from rollout history's
// table, which change while the test runs.
func firstColumns(table string) string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 {
			f = f[:3]
		}
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(out, "\n")
}

func hasOwner(refs []metav1.OwnerReference, kind, name string) bool {
	for _, r := range refs {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}

// labelForMove puts clusterctl's move label on o.
func labelForMove(t *testing.T, o client.Object) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, clusterctlv1.ClusterctlMoveLabel)))
	if err := src.Env.Client.Patch(context.Background(), o, patch); err != nil {
		t.Fatal(err)
	}
}

// setPaused sets or clears the Cluster's spec.paused, as clusterctl move
// does.
func setPaused(t *testing.T, st *stack.Stack, cluster *clusterv1.Cluster, paused bool) {
	t.Helper()
	v := "null"
	if paused {
		v = "true"
	}
	if err := st.Env.Client.Patch(context.Background(), cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":`+v+`}}`))); err != nil {
		t.Fatal(err)
	}
}

// secretVersions is the names and resourceVersions of pool p's Secrets.
func secretVersions(t *testing.T, st *stack.Stack, p *nodepoolv1.NodePool) string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := st.Env.Client.List(context.Background(), list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name+"@"+s.ResourceVersion)
	}
	return strings.Join(out, ",")
}
