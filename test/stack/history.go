package stack

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
)

// HistoryOf returns the pool's rollout records, oldest first.
func (s *Stack) HistoryOf(t testing.TB, p *nodepoolv1.NodePool) []history.Entry {
	t.Helper()
	list := &appsv1.ControllerRevisionList{}
	if err := s.Env.Client.List(context.Background(), list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	history.Sort(list.Items)
	var out []history.Entry
	for i := range list.Items {
		e, err := history.Decode(&list.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// LastRecord waits for the newest record to have initiator and outcome.
func (s *Stack) LastRecord(t testing.TB, p *nodepoolv1.NodePool, initiator, outcome string) history.Entry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var h []history.Entry
	for time.Now().Before(deadline) {
		h = s.HistoryOf(t, p)
		if n := len(h); n > 0 && h[n-1].Initiator == initiator && h[n-1].Outcome == outcome {
			return h[n-1]
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("history does not end with a %s rollout %s: %+v", initiator, outcome, h)
	return history.Entry{}
}

// currentRecord is the pool's current rollout record as the API server has
// it (history.Current of the records the pool controls), nil when none.
func (s *Stack) currentRecord(ctx context.Context, p *nodepoolv1.NodePool) (*appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := s.Env.Client.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		return nil, err
	}
	pool := &nodepoolv1.NodePool{}
	if err := s.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), pool); err != nil {
		return nil, err
	}
	return history.Current(history.Records(pool, list.Items)), nil
}

// RecordState returns what the pool's current rollout record keeps
// (rollout.RecordKeys) and the revision of that record.
func (s *Stack) RecordState(t testing.TB, p *nodepoolv1.NodePool) (int64, map[string]string) {
	t.Helper()
	cr, err := s.currentRecord(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	if cr == nil {
		return 0, out
	}
	for _, k := range rollout.RecordKeys {
		if v := cr.Annotations[k]; v != "" {
			out[k] = v
		}
	}
	return cr.Revision, out
}

// AsAnOlderNodepoolWroteIt moves what the pool's current rollout record
// keeps onto the pool's annotations, where a nodepool before rollout
// records kept it: the objects an upgrade starts from. Call it while no
// controller runs (RestartControllerWith).
func (s *Stack) AsAnOlderNodepoolWroteIt(ctx context.Context, p *nodepoolv1.NodePool) error {
	cr, err := s.currentRecord(ctx, p)
	if err != nil || cr == nil {
		return err
	}
	state := map[string]any{}
	for _, k := range rollout.RecordKeys {
		if v, ok := cr.Annotations[k]; ok {
			state[k] = v
		}
	}
	if len(state) == 0 {
		return nil
	}
	pool := &nodepoolv1.NodePool{}
	if err := s.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), pool); err != nil {
		return err
	}
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": state}})
	if err != nil {
		return err
	}
	if err := s.Env.Client.Patch(ctx, pool, client.RawPatch(types.MergePatchType, raw)); err != nil {
		return err
	}
	for k := range state {
		state[k] = nil
	}
	if raw, err = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": state}}); err != nil {
		return err
	}
	return s.Env.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, raw))
}
