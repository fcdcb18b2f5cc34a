package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"

	"nodepool.dev/nodepool/internal/secrets"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/internal/userdata"
)

// TestMachineDeploymentScalesAndReplaces: a plain Cluster API
// MachineDeployment over a SimMachineTemplate scales 0 → 3 → 5 → 2, every
// Node carrying the labels of the payload it fetched; a new dataSecretName
// replaces every machine, and the new Nodes carry the new payload's labels.
func TestMachineDeploymentScalesAndReplaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := setup(t, simv1.SimMachineSpec{})
	c := env.Client
	a, b := twoBoots(t, ns, "workers")
	if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "workers", "workers", a.UserData, 0)); err != nil {
		t.Fatal(err)
	}

	// The control plane wrote a kubeconfig for the Cluster's view of the
	// same API server.
	kc := &corev1.Secret{}
	eventually(t, time.Minute, func() (bool, string) {
		return get(t, kc, ns, secret.Name("c1", secret.Kubeconfig)), "no kubeconfig Secret"
	})
	if view := "/clusters/" + ns + "/c1"; !strings.Contains(string(kc.Data[secret.KubeconfigDataName]), view) || kc.Labels[clusterv1.ClusterNameLabel] != "c1" {
		t.Fatalf("kubeconfig Secret does not point at the Cluster's view %s or lacks the cluster label: %v", view, kc.Labels)
	}

	// It reports itself initialised and externally managed, and Cluster API
	// agrees.
	eventually(t, time.Minute, func() (bool, string) {
		cp, cluster := &simv1.SimControlPlane{}, &clusterv1.Cluster{}
		get(t, cp, ns, "c1")
		get(t, cluster, ns, "c1")
		return ptr.Deref(cp.Status.Initialization.ControlPlaneInitialized, false) && ptr.Deref(cp.Status.ExternalManagedControlPlane, false) &&
				conditions.IsTrue(cp, simv1.ConditionAvailable) && conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition),
			fmt.Sprintf("SimControlPlane status %+v, Cluster conditions %+v", cp.Status, cluster.Status.Conditions)
	})

	running(t, ns, "workers", 0, a, nil)
	for _, n := range []int32{3, 5, 2} {
		scale(t, ns, "workers", n)
		running(t, ns, "workers", int(n), a, nil)
		t.Logf("scaled to %d", n)
	}
	first := running(t, ns, "workers", 2, a, nil)

	md := &clusterv1.MachineDeployment{}
	get(t, md, ns, "workers")
	before := md.DeepCopy()
	md.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(b.UserData)
	if err := c.Patch(ctx, md, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	running(t, ns, "workers", 2, b, first)

	// The SimMachines report what Cluster API reads.
	list := &simv1.SimMachineList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, sm := range list.Items {
		if !ptr.Deref(sm.Status.Initialization.Provisioned, false) || sm.Spec.ProviderID != "sim://"+ns+"/"+sm.Name ||
			len(sm.Status.Addresses) == 0 || sm.Status.BootedPayload != b.Payload.Hash || !conditions.IsTrue(&sm, simv1.ConditionReady) {
			t.Errorf("SimMachine %s does not report a booted machine: %+v", sm.Name, sm.Status)
		}
	}
}

// TestUnknownTokenBootsOnceValid: a machine whose token the payload server
// does not know stays unprovisioned and says why (condition and Event),
// retrying, and boots on its own once the token becomes valid.
func TestUnknownTokenBootsOnceValid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := setup(t, simv1.SimMachineSpec{})
	c := env.Client
	p, err := simtest.NewPayload("late", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := simtest.CreatePayloadSecret(ctx, c, ns, p); err != nil {
		t.Fatal(err)
	}
	token, err := secrets.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.CreateUserData(ctx, c, ns, "c1", "late-userdata", token); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "late", "workers", "late-userdata", 1)); err != nil {
		t.Fatal(err)
	}
	sm := waitForBooted(t, ns, "late", simv1.ReasonPayloadServerRefused, "511 Network Authentication Required", ps.URL)
	if ptr.Deref(sm.Status.Initialization.Provisioned, false) || sm.Spec.ProviderID != "" {
		t.Fatalf("a machine refused by the payload server is provisioned: %+v", sm)
	}
	if c := conditions.Get(sm, simv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != simv1.ReasonPayloadServerRefused {
		t.Fatalf("Ready does not mirror Booted: %+v", c)
	}
	if strings.Contains(conditions.GetMessage(sm, simv1.ConditionBooted), token) {
		t.Fatal("the condition message quotes the token")
	}
	// Cluster API mirrors the reason into the Machine, where people look.
	eventually(t, time.Minute, func() (bool, string) {
		m, _ := simMachine(t, ns, "late")
		c := conditions.Get(m, clusterv1.MachineInfrastructureReadyCondition)
		return c != nil && c.Reason == simv1.ReasonPayloadServerRefused && strings.Contains(c.Message, "511"),
			fmt.Sprintf("Machine %s InfrastructureReady is %+v", m.Name, c)
	})
	eventually(t, time.Minute, func() (bool, string) {
		events := &eventsv1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Regarding.Name == sm.Name && e.Reason == simv1.ReasonPayloadServerRefused && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no Warning Event %s on SimMachine %s among %d Events", simv1.ReasonPayloadServerRefused, sm.Name, len(events.Items))
	})
	// The machine keeps retrying; it boots once the token is known.
	if _, err := simtest.CreateTokenSecret(ctx, c, ns, "late", token, p.Hash); err != nil {
		t.Fatal(err)
	}
	running(t, ns, "late", 1, &simtest.Boot{Pool: "late", Payload: p, UserData: "late-userdata"}, nil)
}

// TestBootStopsWithAReason: a machine that cannot boot says why on its
// Booted condition: no bootstrap data yet (then boots when it appears),
// user-data that is not a pointer config, a payload that is not a nodepool
// payload, a machine told to fail.
func TestBootStopsWithAReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := setup(t, simv1.SimMachineSpec{})
	c := env.Client

	t.Run("waits for its bootstrap data Secret", func(t *testing.T) {
		if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "early", "workers", "early-userdata", 1)); err != nil {
			t.Fatal(err)
		}
		waitForBooted(t, ns, "early", simv1.ReasonWaitingForBootstrapData, "early-userdata")
		p, err := simtest.NewPayload("early", "v1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := simtest.CreatePayloadSecret(ctx, c, ns, p); err != nil {
			t.Fatal(err)
		}
		token, _ := secrets.GenerateToken()
		if _, err := simtest.CreateTokenSecret(ctx, c, ns, "early", token, p.Hash); err != nil {
			t.Fatal(err)
		}
		if err := ps.CreateUserData(ctx, c, ns, "c1", "early-userdata", token); err != nil {
			t.Fatal(err)
		}
		running(t, ns, "early", 1, &simtest.Boot{Pool: "early", Payload: p, UserData: "early-userdata"}, nil)
	})

	t.Run("refuses user-data that is not a pointer config", func(t *testing.T) {
		s := userdata.NewBootstrapSecret(ns, "cloud-config", "c1", []byte("#cloud-config\nruncmd: [reboot]\n"))
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "cloudinit", "workers", "cloud-config", 1)); err != nil {
			t.Fatal(err)
		}
		waitForBooted(t, ns, "cloudinit", simv1.ReasonInvalidUserData, "not a valid Ignition config")
	})

	t.Run("a payload that is not a nodepool payload is never served: the machine stays down", func(t *testing.T) {
		hash := strings.Repeat("ab", 32)
		s, err := secrets.NewPayloadSecret(ns, "bare-payload", secrets.Payload{
			Pool: "bare", Hash: hash, Ignition: []byte(`{"ignition":{"version":"3.5.0"}}`),
			Manifest: map[string]string{}, Fragments: map[string][]byte{},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		token, _ := secrets.GenerateToken()
		if _, err := simtest.CreateTokenSecret(ctx, c, ns, "bare", token, hash); err != nil {
			t.Fatal(err)
		}
		if err := ps.CreateUserData(ctx, c, ns, "c1", "bare-userdata", token); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "bare", "workers", "bare-userdata", 1)); err != nil {
			t.Fatal(err)
		}
		// The payload server verifies what it serves (its hash, its
		// content, its owner); the machine's own check of what it boots
		// (payload.Inspect) is tested with the payload package.
		waitForBooted(t, ns, "bare", simv1.ReasonPayloadServerRefused)
	})

	t.Run("fails to boot when told to", func(t *testing.T) {
		if err := simtest.CreateMachineTemplate(ctx, c, ns, "broken", simv1.SimMachineSpec{FailBoot: true}); err != nil {
			t.Fatal(err)
		}
		boot, err := ps.CreateBoot(ctx, c, ns, "c1", "broken", "v1")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "broken", "broken", boot.UserData, 1)); err != nil {
			t.Fatal(err)
		}
		sm := waitForBooted(t, ns, "broken", simv1.ReasonBootFailed)
		if sm.Status.NodeName != "" || ptr.Deref(sm.Status.Initialization.Provisioned, false) {
			t.Fatalf("a machine told to fail registered a Node: %+v", sm.Status)
		}
	})
}

// TestKnobs: a boot delay holds a machine in Booting until the delay,
// lowered by the annotation, has passed; the unhealthy annotation turns its
// Node NotReady and back; deleting a SimMachine deletes its Node.
//
// The template's delay is an hour, so the machine is still Booting however
// late the provider first reconciles it on a busy machine (the delay counts
// from the SimMachine's creation); the annotation then ends it.
func TestKnobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := setup(t, simv1.SimMachineSpec{BootDelay: &metav1.Duration{Duration: time.Hour}})
	c := env.Client
	boot, err := ps.CreateBoot(ctx, c, ns, "c1", "knobs", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, simtest.MachineDeployment(ns, "c1", "knobs", "workers", boot.UserData, 1)); err != nil {
		t.Fatal(err)
	}
	sm := waitForBooted(t, ns, "knobs", simv1.ReasonBooting, "boot delay 1h0m0s")
	annotate(t, sm, simv1.AnnotationBootDelay, "0s")
	running(t, ns, "knobs", 1, boot, nil)
	m, sm := simMachine(t, ns, "knobs")

	nodeReady := func(want corev1.ConditionStatus, healthReason string) {
		t.Helper()
		eventually(t, time.Minute, func() (bool, string) {
			node := &corev1.Node{}
			get(t, node, "", sm.Status.NodeName)
			_, sm := simMachine(t, ns, "knobs")
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == want && conditions.GetReason(sm, simv1.ConditionNodeHealthy) == healthReason {
					return true, ""
				}
			}
			return false, fmt.Sprintf("Node %s conditions %+v, SimMachine NodeHealthy %s; want Ready %s", node.Name, node.Status.Conditions, conditions.GetReason(sm, simv1.ConditionNodeHealthy), want)
		})
	}
	annotate(t, m, simv1.AnnotationUnhealthy, "true")
	nodeReady(corev1.ConditionFalse, simv1.ReasonNodeUnhealthy)
	annotate(t, m, simv1.AnnotationUnhealthy, "false")
	nodeReady(corev1.ConditionTrue, simv1.ReasonNodeReady)

	// Pause the Machine's reconciliation so only the sim provider acts on
	// the deletion, then delete the SimMachine: its Node goes with it.
	annotate(t, m, clusterv1.PausedAnnotation, "")
	if err := c.Delete(ctx, sm); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		return !get(t, &corev1.Node{}, "", sm.Status.NodeName) && !get(t, &simv1.SimMachine{}, ns, sm.Name),
			fmt.Sprintf("Node %s or SimMachine %s still exists", sm.Status.NodeName, sm.Name)
	})
}

// twoBoots publishes two payloads ("a" and "b") of a pool of cluster c1,
// each with its token and user-data.
func twoBoots(t *testing.T, ns, pool string) (a, b *simtest.Boot) {
	t.Helper()
	var err error
	if a, err = ps.CreateBoot(context.Background(), env.Client, ns, "c1", pool, "a"); err != nil {
		t.Fatal(err)
	}
	if b, err = ps.CreateBoot(context.Background(), env.Client, ns, "c1", pool, "b"); err != nil {
		t.Fatal(err)
	}
	return a, b
}
