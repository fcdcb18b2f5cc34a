package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestTheLastReconcileOfEachPoolIsOneSeriesThatGoesWithThePool(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 500_000_000, time.UTC)
	a := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers"}}
	b := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "workers"}}
	defer forgetPool(a)
	defer forgetPool(b)
	observeReconciled(a, at.Add(-time.Minute))
	observeReconciled(a, at)
	observeReconciled(b, at.Add(-time.Hour))
	if n := testutil.CollectAndCount(lastReconcile); n != 2 {
		t.Fatalf("%d series for 2 pools reconciled 3 times, want 2 (one per pool)", n)
	}
	if got, want := testutil.ToFloat64(lastReconcile.WithLabelValues("team-a", "workers")), float64(at.UnixMilli())/1e3; got != want {
		t.Errorf("team-a/workers last reconciled at %v, want %v (the latest reconcile, in Unix seconds)", got, want)
	}
	forgetPool(a)
	if n := testutil.CollectAndCount(lastReconcile); n != 1 {
		t.Errorf("%d series after team-a/workers was deleted, want 1 (team-b's)", n)
	}
}
