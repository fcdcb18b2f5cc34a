package controller

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// poolGaugeVec is a gauge vector whose series each belong to one pool
// (their first labels are the pool's namespace and name) and are replaced
// at every reconcile of it. The series a pool set are remembered, so that
// replacing them deletes exactly those: DeletePartialMatch tests every
// series of every pool, which made each reconcile cost grow with the fleet.
type poolGaugeVec struct {
	*prometheus.GaugeVec
	mu  sync.Mutex
	set map[[2]string]map[string][]string // by namespace and pool, by joined label values
}

func newPoolGaugeVec(opts prometheus.GaugeOpts, labels []string) *poolGaugeVec {
	return &poolGaugeVec{GaugeVec: prometheus.NewGaugeVec(opts, labels), set: map[[2]string]map[string][]string{}}
}

// reset deletes every series of the pool.
func (v *poolGaugeVec) reset(namespace, pool string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := [2]string{namespace, pool}
	for _, lvs := range v.set[key] {
		v.DeleteLabelValues(lvs...)
	}
	delete(v.set, key)
}

// setTo sets the series of the label values lvs, the pool's namespace and
// name first.
func (v *poolGaugeVec) setTo(value float64, lvs ...string) {
	v.WithLabelValues(lvs...).Set(value)
	v.remember(lvs)
}

// addTo adds to the series of the label values lvs.
func (v *poolGaugeVec) addTo(delta float64, lvs ...string) {
	v.WithLabelValues(lvs...).Add(delta)
	v.remember(lvs)
}

func (v *poolGaugeVec) remember(lvs []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := [2]string{lvs[0], lvs[1]}
	if v.set[key] == nil {
		v.set[key] = map[string][]string{}
	}
	v.set[key][strings.Join(lvs, "\x00")] = slices.Clone(lvs)
}
