package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

// revisionsOf waits until the pool has n revisions, the newest complete.
func revisionsOf(t *testing.T, ns string, n int) []history.Entry {
	t.Helper()
	deadline := time.Now().Add(rolloutTimeout)
	var h []history.Entry
	for time.Now().Before(deadline) {
		h = decodeJSON[[]history.Entry](t, ok(t, ns, "rollout", "history", "workers", "-o", "json"))
		if len(h) == n && h[n-1].Outcome == history.OutcomeComplete {
			return h
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("want %d revisions, the newest complete; have %+v", n, h)
	return nil
}

func TestRolloutHistoryListsEveryRolloutAndShowsOne(t *testing.T) {
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 1, nil)
	waitFor(t, p, rolloutTimeout, "1 ready machine", settled(1))
	revisionsOf(t, ns, 1)
	ok(t, ns, "rollout", "restart", "workers")
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Release.Version = "v1.36.4" })
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	h := revisionsOf(t, ns, 3)
	if h[0].Initiator != "spec" || h[1].Initiator != "restart" || h[2].Initiator != "version" {
		t.Errorf("initiators %s, %s, %s; want spec, restart, version", h[0].Initiator, h[1].Initiator, h[2].Initiator)
	}
	golden(t, "history", ok(t, ns, "rollout", "history", "workers"), ns)
	golden(t, "history-revision", ok(t, ns, "rollout", "history", "workers", "--revision", "1"), ns)

	d := decodeJSON[cli.RevisionDetail](t, ok(t, ns, "rollout", "history", "workers", "--revision", "3", "-o", "yaml", "-o", "json"))
	if d.Spec.Release.Version != "v1.36.4" || len(d.SourceStates) != 1 || d.SourceStates[0].State != cli.SourceUnchanged {
		t.Errorf("revision 3 = %+v", d)
	}
	r := fails(t, ns, cli.ExitFailure, "rollout", "history", "workers", "--revision", "9")
	if !strings.Contains(r.err, "revision 9 of nodepool.nodepool.dev/workers not found: recorded revisions are 1, 2, 3") {
		t.Errorf("unexpected error: %s", r.err)
	}
}

func TestRolloutUndoRestoresTheSpecAndRefusesChangedSources(t *testing.T) {
	ns := newNamespace(t)
	mustCreate(t, stack.ConfigMap(ns, "chrony-2", stack.Chrony("ntp2.corp.example")))
	p := newPool(t, ns, "workers", 1, nil)
	waitFor(t, p, rolloutTimeout, "1 ready machine", settled(1))
	update(t, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Config = []nodepoolv1.LocalObjectReference{{Name: "chrony-2"}}
		p.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"example.com/tier": "two"}
	})
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	h := revisionsOf(t, ns, 2)

	// Back to revision 1: the previous configuration, same rollout hash.
	out := ok(t, ns, "rollout", "undo", "workers")
	golden(t, "undo", out, ns)
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	h = revisionsOf(t, ns, 3)
	if h[2].RolloutHash != h[0].RolloutHash {
		t.Errorf("after undo the rollout hash is %s, revision 1 had %s", h[2].RolloutHash, h[0].RolloutHash)
	}
	s := observe(t, p)
	if s.pool.Spec.Config[0].Name != "chrony" || s.pool.Spec.NodeLabels != nil || *s.pool.Spec.Replicas != 1 {
		t.Errorf("spec after undo: %+v", s.pool.Spec)
	}

	// chrony-2 changes and chrony goes away: going to revision 2 is refused,
	// naming the ConfigMap, unless forced.
	update(t, stack.ConfigMap(ns, "chrony-2", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("ntp3.corp.example") })
	r := fails(t, ns, cli.ExitFailure, "rollout", "undo", "workers", "--to-revision", "2")
	golden(t, "undo-refused", r.err, ns)
	if err := st.Env.Client.Delete(context.Background(), stack.ConfigMap(ns, "chrony", "")); err != nil {
		t.Fatal(err)
	}
	r = fails(t, ns, cli.ExitFailure, "rollout", "undo", "workers", "--to-revision", "1")
	if !strings.Contains(r.err, "ConfigMap "+ns+"/chrony no longer exists") {
		t.Errorf("undo to revision 1 does not name the deleted ConfigMap:\n%s", r.err)
	}
	r = kubectl(t, ns, "rollout", "undo", "workers", "--to-revision", "2", "--force")
	if r.code != 0 || !strings.Contains(r.out, "rolled back to revision 2") || !strings.Contains(r.err, "Warning: ConfigMap "+ns+"/chrony-2 changed since revision 2") {
		t.Errorf("forced undo: exit %d\n%s%s", r.code, r.out, r.err)
	}
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	if s := observe(t, p); s.pool.Spec.Config[0].Name != "chrony-2" || s.pool.Spec.NodeLabels["example.com/tier"] != "two" {
		t.Errorf("spec after the forced undo: %+v", s.pool.Spec)
	}
}

func TestARevisionWithACopiedOwnerReferenceIsNeitherHistoryNorAnUndoTarget(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 1, nil)
	waitFor(t, p, rolloutTimeout, "1 ready machine", settled(1))
	revisionsOf(t, ns, 1)
	pool := &nodepoolv1.NodePool{}
	if err := st.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), pool); err != nil {
		t.Fatal(err)
	}
	// Someone who may create ControllerRevisions in the namespace claims
	// a rollout for the pool: its label, its UID as controller.
	forged, err := history.New(ns, "workers", history.Entry{Revision: 7, Initiator: "spec", RolloutHash: "0123456789abcdef",
		Started: time.Now(), Spec: *pool.Spec.DeepCopy()})
	if err != nil {
		t.Fatal(err)
	}
	forged.Data.Raw = []byte(strings.Replace(string(forged.Data.Raw), `"version":"v1.36.3"`, `"version":"v1.30.0"`, 1))
	if err := controllerutil.SetControllerReference(pool, forged, st.Env.Scheme); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, forged)

	if h := decodeJSON[[]history.Entry](t, ok(t, ns, "rollout", "history", "workers", "-o", "json")); len(h) != 1 || h[0].Revision != 1 {
		t.Errorf("history lists %+v, want revision 1 only", h)
	}
	r := fails(t, ns, cli.ExitFailure, "rollout", "undo", "workers", "--to-revision", "7")
	if !strings.Contains(r.err, "revision 7 of nodepool.nodepool.dev/workers not found: recorded revisions are 1") {
		t.Errorf("undo to the forged revision: %s", r.err)
	}
	// The next rollout is numbered past it and is the only other record.
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Release.Version = "v1.36.4" })
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	h := revisionsOf(t, ns, 2)
	if h[1].Revision != 8 || h[1].Initiator != "version" {
		t.Errorf("the next rollout is %+v, want revision 8 for version", h[1])
	}
}
