package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Every fleet rollout records its own initiator (fleetrollout/<name>), but
// the rollout metrics count them under one label value: a series per pool
// and FleetRollout would grow without bound over a fleet's life.
func TestFleetRolloutsAddNoSeriesPerFleetRollout(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "series", Name: "workers"}}
	t.Cleanup(func() { forgetPool(pool) })
	before := testutil.CollectAndCount(rolloutsStarted) + testutil.CollectAndCount(rolloutsCompleted)
	for i := range 20 {
		initiator := nodepoolv1.FleetRolloutInitiator(fmt.Sprintf("bump-%d", i))
		observeRolloutStarted(pool, initiator)
		observeRolloutCompleted(pool, initiator, "Complete", time.Minute)
	}
	if n := testutil.CollectAndCount(rolloutsStarted) + testutil.CollectAndCount(rolloutsCompleted) - before; n != 2 {
		t.Errorf("20 fleet rollouts of one pool added %d series, want 2 (started and completed, initiator fleetrollout)", n)
	}
	if got := testutil.ToFloat64(rolloutsStarted.WithLabelValues("series", "workers", "fleetrollout")); got != 20 {
		t.Errorf("started{initiator=fleetrollout} = %v, want 20", got)
	}
}
