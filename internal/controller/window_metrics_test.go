package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestWindowMetricsSayHowLongUntilTheWindowAndEachDriftDeadline(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers"}}
	pool.Spec.Management.Maintenance = &nodepoolv1.Maintenance{DriftDeadline: &metav1.Duration{Duration: 720 * time.Hour}}
	pool.Status.Maintenance = &nodepoolv1.MaintenanceStatus{NextWindow: &nodepoolv1.WindowInterval{Start: metav1.NewTime(now.Add(90 * time.Minute))}}
	pool.Status.PendingManagementChanges = []nodepoolv1.PendingManagementChange{
		{Component: "apiserver-proxy", Since: metav1.NewTime(now.Add(-719 * time.Hour))},
		{Component: "renderer", Since: metav1.NewTime(now.Add(-721 * time.Hour))},
	}
	observeWindow(pool, now)
	defer forgetPool(pool)
	if got := testutil.ToFloat64(nextWindow.WithLabelValues("team-a", "workers")); got != 5400 {
		t.Errorf("next window in %v s, want 5400", got)
	}
	if got := testutil.ToFloat64(driftDeadline.WithLabelValues("team-a", "workers", "apiserver-proxy")); got != 3600 {
		t.Errorf("apiserver-proxy deadline in %v s, want 3600", got)
	}
	if got := testutil.ToFloat64(driftDeadline.WithLabelValues("team-a", "workers", "renderer")); got != -3600 {
		t.Errorf("renderer deadline in %v s, want -3600 (passed)", got)
	}
	pool.Spec.Management.Maintenance = nil
	observeWindow(pool, now)
	if n := testutil.CollectAndCount(nextWindow); n != 0 {
		t.Errorf("%d next-window series left for a pool without maintenance settings", n)
	}
}
