package stack

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
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
