package sim_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/internal/userdata"
)

// TestNodeAgentUpdatesInPlace: the node agent of a booted machine answers
// the node update protocol on its Node. Told to fail, it reports Degraded
// with the knob's message and changes nothing else; without the knob it
// reports Working for the update delay, then applies the desired payload
// (labels swapped, current payload, Done). A payload server that serves
// another payload than the desired one keeps it Working until the update
// Secret points at the right token; a missing update Secret is Degraded
// until the Node names one that exists. An update given up while Working
// leaves the Node as it was.
func TestNodeAgentUpdatesInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := setup(t, simv1.SimMachineSpec{})
	c := env.Client
	a, b := twoBoots(t, ns, "inplace")
	// The update Secret lives in the workload cluster (the same API server
	// here), as the controller writes it: a pointer config with b's token.
	updateSecret := createUpdateSecret(t, ns, "update-inplace", b.Token)

	if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "inplace", "workers", a.UserData, 1)); err != nil {
		t.Fatal(err)
	}
	running(t, ns, "inplace", 1, a, nil)
	m, sm := simMachine(t, ns, "inplace")
	nodeName := sm.Status.NodeName

	// Labels the old payload set that the new one does not must go (real
	// payloads all set the same keys, so pretend a's set one more), and
	// labels of others must stay.
	const oldOnly, others = "test.nodepool.dev/old-payload-only", "test.nodepool.dev/team"
	patch := fmt.Sprintf(`{"status":{"nodeLabels":{%q:"x"}}}`, oldOnly)
	if err := c.Status().Patch(ctx, sm, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	get(t, node, "", nodeName)
	patch = fmt.Sprintf(`{"metadata":{"labels":{%q:"x",%q:"blue"}}}`, oldOnly, others)
	if err := c.Patch(ctx, node, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}

	// Told to fail: Degraded with the knob's message, nothing else changes.
	annotate(t, m, simv1.AnnotationFailUpdate, "disk full")
	get(t, node, "", nodeName)
	labelsBefore := maps.Clone(node.Labels)
	askUpdate(t, nodeName, b.Payload.Hash, updateSecret)
	waitForUpdateState(t, nodeName, nodepoolv1.UpdateStateDegraded, "sim knob", simv1.AnnotationFailUpdate, "disk full")
	waitForEvent(t, ns, sm.Name, simv1.ReasonUpdateDegraded, corev1.EventTypeWarning, "disk full")
	time.Sleep(time.Second) // it stays so
	get(t, node, "", nodeName)
	if node.Annotations[nodepoolv1.AnnotationUpdateState] != nodepoolv1.UpdateStateDegraded || node.Annotations[nodepoolv1.AnnotationNodeCurrentPayload] != "" ||
		node.Annotations[simv1.AnnotationUpdateStarted] != "" || !maps.Equal(node.Labels, labelsBefore) {
		t.Fatalf("a machine told to fail its update changed its Node: annotations %v, labels %v (before %v)", node.Annotations, node.Labels, labelsBefore)
	}

	// Without the knob it retries: Working for the update delay, then Done.
	annotate(t, sm, simv1.AnnotationUpdateDelay, "2s")
	unannotate(t, m, simv1.AnnotationFailUpdate)
	waitForUpdateState(t, nodeName, nodepoolv1.UpdateStateWorking)
	workingAt := time.Now()
	n := waitForUpdated(t, nodeName, b)
	if took := time.Since(workingAt); took < time.Second {
		t.Errorf("the update took %s, shorter than its 2s update delay", took)
	}
	if n.Labels[oldOnly] != "" || n.Labels[others] != "blue" || n.Labels[corev1.LabelHostname] == "" {
		t.Errorf("Node labels %v: want %s gone, %s=blue and the kubelet's kept", n.Labels, oldOnly, others)
	}
	if got := n.Annotations[nodepoolv1.AnnotationBootedPayload]; got != a.Payload.Hash {
		t.Errorf("booted payload annotation %q, want the first boot's %q", got, a.Payload.Hash)
	}
	eventually(t, time.Minute, func() (bool, string) {
		get(t, sm, ns, sm.Name)
		return maps.Equal(sm.Status.NodeLabels, b.NodeLabels()), fmt.Sprintf("SimMachine nodeLabels %v, want %v", sm.Status.NodeLabels, b.NodeLabels())
	})
	waitForEvent(t, ns, sm.Name, simv1.ReasonUpdatedInPlace, corev1.EventTypeNormal, payload.Short(b.Payload.Hash))

	// The machine reconciler, woken by a knob, keeps the new labels.
	annotate(t, m, simv1.AnnotationUnhealthy, "false")
	time.Sleep(time.Second)
	get(t, node, "", nodeName)
	if err := checkUpdated(node, b); err != nil {
		t.Fatalf("after the machine reconciled again: %v", err)
	}

	// Back to a, with the update Secret still on b's token: the payload
	// server serves b, so the agent waits, Working; pointing the Secret at
	// a's token lets it finish.
	askUpdate(t, nodeName, a.Payload.Hash, updateSecret)
	waitForUpdateState(t, nodeName, nodepoolv1.UpdateStateWorking, "serves payload "+payload.Short(b.Payload.Hash), "not the desired "+payload.Short(a.Payload.Hash))
	s := &corev1.Secret{}
	get(t, s, ns, "update-inplace")
	pointer, err := userdata.Render(ps.URL, ps.CA, a.Token)
	if err != nil {
		t.Fatal(err)
	}
	s.Data[secrets.UpdateSecretKey] = pointer
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitForUpdated(t, nodeName, a)

	// A missing update Secret is Degraded, naming it, until the Node names
	// one that exists.
	askUpdate(t, nodeName, b.Payload.Hash, ns+"/no-such-secret")
	waitForUpdateState(t, nodeName, nodepoolv1.UpdateStateDegraded, ns+"/no-such-secret", "does not exist")
	b2 := createUpdateSecret(t, ns, "update-inplace-b", b.Token)
	askUpdate(t, nodeName, b.Payload.Hash, b2)
	waitForUpdated(t, nodeName, b)

	// An update the controller gives up while the agent works on it: the
	// agent forgets its start, and changes nothing else.
	annotate(t, sm, simv1.AnnotationUpdateDelay, "1h")
	askUpdate(t, nodeName, a.Payload.Hash, b2)
	waitForUpdateState(t, nodeName, nodepoolv1.UpdateStateWorking)
	unannotate(t, node, nodepoolv1.AnnotationDesiredPayload)
	eventually(t, time.Minute, func() (bool, string) {
		get(t, node, "", nodeName)
		_, started := node.Annotations[simv1.AnnotationUpdateStarted]
		return !started, fmt.Sprintf("Node %s keeps annotation %s of an update given up", nodeName, simv1.AnnotationUpdateStarted)
	})
	if got := node.Annotations[nodepoolv1.AnnotationNodeCurrentPayload]; got != b.Payload.Hash || node.Labels[nodepoolv1.LabelPayload] != payload.Short(b.Payload.Hash) {
		t.Errorf("an update given up changed the Node: current payload %q, labels %v", got, node.Labels)
	}
}

// createUpdateSecret creates an update Secret holding a pointer config to
// the payload server with token, and returns its "<namespace>/<name>".
func createUpdateSecret(t *testing.T, namespace, name, token string) string {
	t.Helper()
	pointer, err := userdata.Render(ps.URL, ps.CA, token)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       map[string][]byte{secrets.UpdateSecretKey: pointer},
	}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return namespace + "/" + name
}

// askUpdate does the controller's part of step 1 of the protocol on a Node:
// the desired payload and the update Secret.
func askUpdate(t *testing.T, nodeName, desired, updateSecret string) {
	t.Helper()
	node := &corev1.Node{}
	get(t, node, "", nodeName)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		nodepoolv1.AnnotationDesiredPayload, desired, nodepoolv1.AnnotationUpdateSecret, updateSecret)
	if err := env.Client.Patch(context.Background(), node, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func unannotate(t *testing.T, obj client.Object, key string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, key)
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// waitForUpdateState waits until a Node's update state is state with a
// message containing each of contains.
func waitForUpdateState(t *testing.T, nodeName, state string, contains ...string) {
	t.Helper()
	eventually(t, time.Minute, func() (bool, string) {
		node := &corev1.Node{}
		get(t, node, "", nodeName)
		got, msg := node.Annotations[nodepoolv1.AnnotationUpdateState], node.Annotations[nodepoolv1.AnnotationUpdateMessage]
		if got != state {
			return false, fmt.Sprintf("Node %s update state %q (message %q), want %s", nodeName, got, msg, state)
		}
		for _, s := range contains {
			if !strings.Contains(msg, s) {
				return false, fmt.Sprintf("Node %s update message %q lacks %q", nodeName, msg, s)
			}
		}
		return true, ""
	})
}

// waitForUpdated waits until a Node runs want's payload after an update,
// and returns it.
func waitForUpdated(t *testing.T, nodeName string, want *simtest.Boot) *corev1.Node {
	t.Helper()
	node := &corev1.Node{}
	eventually(t, time.Minute, func() (bool, string) {
		get(t, node, "", nodeName)
		if err := checkUpdated(node, want); err != nil {
			return false, fmt.Sprintf("Node %s: %v", nodeName, err)
		}
		return true, ""
	})
	return node
}

// checkUpdated checks that a Node reports want's payload as current and
// Done, without a message or a start, and carries its labels.
func checkUpdated(node *corev1.Node, want *simtest.Boot) error {
	a := node.Annotations
	if a[nodepoolv1.AnnotationNodeCurrentPayload] != want.Payload.Hash || a[nodepoolv1.AnnotationUpdateState] != nodepoolv1.UpdateStateDone {
		return fmt.Errorf("current payload %q, state %q (message %q), want %s and Done",
			a[nodepoolv1.AnnotationNodeCurrentPayload], a[nodepoolv1.AnnotationUpdateState], a[nodepoolv1.AnnotationUpdateMessage], payload.Short(want.Payload.Hash))
	}
	if _, ok := a[nodepoolv1.AnnotationUpdateMessage]; ok {
		return fmt.Errorf("a Done update keeps message %q", a[nodepoolv1.AnnotationUpdateMessage])
	}
	if _, ok := a[simv1.AnnotationUpdateStarted]; ok {
		return fmt.Errorf("a Done update keeps annotation %s", simv1.AnnotationUpdateStarted)
	}
	for k, v := range want.NodeLabels() {
		if node.Labels[k] != v {
			return fmt.Errorf("label %s=%q, want %q (labels %v)", k, node.Labels[k], v, node.Labels)
		}
	}
	return nil
}

// waitForEvent waits for an Event about the SimMachine name with reason,
// type and a note containing contains.
func waitForEvent(t *testing.T, namespace, name, reason, eventType, contains string) {
	t.Helper()
	eventually(t, time.Minute, func() (bool, string) {
		events := &eventsv1.EventList{}
		if err := env.Client.List(context.Background(), events, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == eventType && strings.Contains(e.Note, contains) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no %s Event %s on SimMachine %s containing %q among %d Events", eventType, reason, name, contains, len(events.Items))
	})
}
