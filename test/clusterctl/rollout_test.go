package clusterctl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/test/stack"
)

// TestClusterctlRolloutCommandsOnAPoolAreRefusedWithTheNodepoolCommand:
// Cluster API's `clusterctl alpha rollout restart|pause|resume` on a pool's
// MachineDeployment (the pinned clusterctl library) change nothing: restart
// and pause are refused by the admission policy with the `kubectl nodepool
// rollout` command to use, and resume finds nothing paused. The pinned
// clusterctl has no `rollout undo` (Cluster API removed it); what it did,
// writing a former machine template back onto the MachineDeployment, is
// refused too, on the MachineDeployment and on its MachineSet, pointing at
// `kubectl nodepool rollout undo`. Meanwhile the pool's own rollout runs
// (Cluster API's controllers and nodepool's are not refused), and nothing
// rolls for the refused commands; writes of other fields are accepted;
// and a pause that slips past the policies is resumed by the controller,
// with an event.
func TestClusterctlRolloutCommandsOnAPoolAreRefusedWithTheNodepoolCommand(t *testing.T) {
	install(t)
	ctx := context.Background()
	p := newPool(t, 2)
	s := waitFor(t, p, "2 ready machines", func(s state) bool { return s.settled(2) })
	former := machineDeployment(t, p).Spec.Template

	// The owner's change rolls every machine: Cluster API's controllers
	// create and scale MachineSets, nodepool's writes the template.
	stack.SetChrony(t, env.Client, p.Namespace, "time2.corp.example")
	s = waitFor(t, p, "every machine replaced on the new payload", func(n state) bool {
		return n.settled(2) && !n.machines.UIDs.HasAny(s.machines.UIDs.UnsortedList()...) && n.history == 2
	})

	c, err := ctl.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kc := clusterctlclient.Kubeconfig{Path: ctl.Kubeconfig}
	md := []string{"machinedeployment/" + p.Name}
	use := func(cmd string) string {
		return fmt.Sprintf("`kubectl nodepool rollout %s %s -n %s`", cmd, p.Name, p.Namespace)
	}

	err = c.RolloutRestart(ctx, clusterctlclient.RolloutRestartOptions{Kubeconfig: kc, Resources: md, Namespace: p.Namespace})
	refused(t, "clusterctl alpha rollout restart", err, "nodepool-owns-machinedeployments", use("restart"))
	err = c.RolloutPause(ctx, clusterctlclient.RolloutPauseOptions{Kubeconfig: kc, Resources: md, Namespace: p.Namespace})
	refused(t, "clusterctl alpha rollout pause", err, "nodepool-owns-machinedeployments", use("pause"))
	err = c.RolloutResume(ctx, clusterctlclient.RolloutResumeOptions{Kubeconfig: kc, Resources: md, Namespace: p.Namespace})
	if err == nil || !strings.Contains(err.Error(), "not currently paused") {
		t.Errorf("clusterctl alpha rollout resume: %v, want clusterctl's own refusal of a MachineDeployment that is not paused", err)
	}

	// What `clusterctl alpha rollout undo` did.
	tmpl, err := json.Marshal(map[string]any{"spec": map[string]any{"template": former}})
	if err != nil {
		t.Fatal(err)
	}
	err = env.Client.Patch(ctx, machineDeployment(t, p), client.RawPatch(types.MergePatchType, tmpl))
	refused(t, "writing the former template onto the MachineDeployment", err, "nodepool-owns-machinedeployments", use("undo"))
	sets := &clusterv1.MachineSetList{}
	if err := env.Client.List(ctx, sets, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil || len(sets.Items) == 0 {
		t.Fatalf("the pool's MachineSets: %d, %v", len(sets.Items), err)
	}
	err = env.Client.Patch(ctx, &sets.Items[0], client.RawPatch(types.MergePatchType, tmpl))
	refused(t, "writing the former template onto the MachineSet", err, "nodepool-owns-machinesets", use("undo"))

	// Writes of other fields are not the policies' business.
	note := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/note":"seen"}}}`))
	if err := env.Client.Patch(ctx, machineDeployment(t, p), note); err != nil {
		t.Errorf("annotating the MachineDeployment: %v, want accepted", err)
	}
	if err := env.Client.Patch(ctx, &sets.Items[0], note); err != nil {
		t.Errorf("annotating the MachineSet: %v, want accepted", err)
	}

	// A pause that slips past the policies (where they are not installed;
	// here written as Cluster API's ServiceAccount, which they let through)
	// is resumed by the controller, with an event saying how to pause, and
	// is on the pool's record (initiator external, outcome Reverted, the
	// field manager that wrote it): Cluster API's controllers never pause a
	// MachineDeployment, so a pause under an exempt identity is a person's
	// or a tool's, and the history promises every such hold is on record.
	const pauser = "clusterctl-as-capi"
	asCAPI := rest.CopyConfig(env.Config)
	asCAPI.Impersonate = rest.ImpersonationConfig{UserName: stack.ClusterAPIUser, Groups: []string{"system:masters", "system:authenticated"}}
	capiClient, err := client.New(asCAPI, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := capiClient.Patch(ctx, machineDeployment(t, p), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`)), client.FieldOwner(pauser)); err != nil {
		t.Fatalf("pausing the MachineDeployment as Cluster API: %v", err)
	}
	stack.WaitFor(t, timeout, "the controller to resume the MachineDeployment, with an event", func() string {
		checkReplicas(t)
		if ptr.Deref(machineDeployment(t, p).Spec.Paused, false) {
			return "paused"
		}
		evs := &eventsv1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(p.Namespace)); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == nodepoolv1.EventMachineDeploymentResumed && e.Regarding.Name == p.Name && strings.Contains(e.Note, use("pause")) {
				return ""
			}
		}
		return "resumed, no event " + nodepoolv1.EventMachineDeploymentResumed
	}, func(s string) bool { return s == "" }, func(s string) string { return s })

	// Nothing was written, nothing rolls; the record is the pool's, and
	// the pause that slipped past is on it, once.
	got := machineDeployment(t, p)
	if !got.Spec.Rollout.After.IsZero() || ptr.Deref(got.Spec.Paused, false) {
		t.Errorf("the MachineDeployment has rollout.after %v, paused %v", got.Spec.Rollout.After, got.Spec.Paused)
	}
	after := observe(t, p)
	if !after.settled(2) || !after.machines.UIDs.Equal(s.machines.UIDs) || after.history != s.history+1 {
		t.Errorf("after the refused commands and the pause: %s; want the same 2 machines and %d revisions (the pause's record)", after, s.history+1)
	}
	if e := newestRecord(t, p); e.Initiator != history.InitiatorExternal || e.Outcome != history.OutcomeReverted ||
		e.Manager != pauser || !slices.Equal(e.Fields, []string{"spec.paused"}) {
		t.Errorf("the newest record: initiator %q, outcome %q, manager %q, fields %v; want the pause: %s, %s, %s, [spec.paused]",
			e.Initiator, e.Outcome, e.Manager, e.Fields, history.InitiatorExternal, history.OutcomeReverted, pauser)
	}
}

// refused fails unless err is the policy's refusal naming the command.
func refused(t *testing.T, what string, err error, policy, command string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want refused by %s", what, policy)
		return
	}
	if msg := err.Error(); !strings.Contains(msg, "ValidatingAdmissionPolicy '"+policy+"'") || !strings.Contains(msg, command) {
		t.Errorf("%s: %v\nwant the refusal of %s naming %s", what, err, policy, command)
		return
	}
	t.Logf("%s: %v", what, err)
}

func machineDeployment(t *testing.T, p *nodepoolv1.NodePool) *clusterv1.MachineDeployment {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), md); err != nil {
		t.Fatal(err)
	}
	return md
}
