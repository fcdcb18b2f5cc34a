package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestReplacingAPoolsSeriesLeavesEveryOtherPoolsAlone(t *testing.T) {
	v := newPoolGaugeVec(prometheus.GaugeOpts{Name: "test_pool_series"}, []string{"namespace", "pool", "component"})
	v.setTo(1, "a", "workers", "apiserver-proxy")
	v.setTo(1, "a", "workers", "renderer")
	v.setTo(1, "a", "gpu", "renderer")
	v.addTo(2, "b", "workers", "renderer")
	v.addTo(1, "b", "workers", "renderer")
	if n := testutil.CollectAndCount(v); n != 4 {
		t.Fatalf("%d series, want 4", n)
	}
	v.reset("a", "workers")
	v.setTo(1, "a", "workers", "renderer")
	if n := testutil.CollectAndCount(v); n != 3 {
		t.Fatalf("%d series after replacing a/workers' two with one, want 3", n)
	}
	if got := testutil.ToFloat64(v.WithLabelValues("b", "workers", "renderer")); got != 3 {
		t.Fatalf("another namespace's pool of the same name has %v, want 3", got)
	}
	v.reset("a", "gpu")
	v.reset("a", "gpu") // nothing left: no effect
	v.reset("b", "workers")
	v.reset("a", "workers")
	if n := testutil.CollectAndCount(v); n != 0 {
		t.Fatalf("%d series after every pool's were reset", n)
	}
}
