package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/history/listing"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/scenario"
)

// predictions remembers, per fleet rollout, the point its last forecast
// was made at (its phase and completed waves): a forecast is made when
// the rollout starts and each time a wave completes, not at every
// reconcile. A restarted controller forecasts once again.
type predictions struct {
	mu   sync.Mutex
	seen map[string]prediction
	// running are the forecasts being computed, by rollout, with their
	// point: a forecast runs beside the reconciles (it can take seconds
	// over hundreds of pools), and the next reconcile writes it.
	running map[string]string
}

// start marks a forecast at point as running; false when one is.
func (p *predictions) start(name, point string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.running = map[string]string{}
	}
	if _, busy := p.running[name]; busy {
		return false
	}
	p.running[name] = point
	return true
}

func (p *predictions) done(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, name)
}

// prediction is a forecast made, with the point it was made at.
type prediction struct {
	point      string
	completion *metav1.Time
	waves      map[int32]*metav1.Time
}

// last is the forecast made at point, if one was.
func (p *predictions) last(name, point string) (prediction, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.seen[name]
	return v, ok && v.point == point
}

func (p *predictions) keep(name string, v prediction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]prediction{}
	}
	p.seen[name] = v
}

// apply writes the forecast into the status (the waves not completed).
func (v prediction) apply(st *nodepoolv1.FleetRolloutStatus) {
	st.PredictedCompletion = v.completion
	for i := range st.Waves {
		if w := &st.Waves[i]; w.CompletedAt == nil {
			w.PredictedEnd = v.waves[w.Wave]
		}
	}
}

func (p *predictions) forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.seen, name)
}

// predictionPoint is what a forecast is made again on: the phase and the
// waves completed.
func predictionPoint(st *nodepoolv1.FleetRolloutStatus) string {
	done := 0
	for _, w := range st.Waves {
		if w.CompletedAt != nil {
			done++
		}
	}
	return fmt.Sprintf("%s/%d/%d", st.Phase, st.CurrentWave, done)
}

// predictionPoll is how soon a rollout whose forecast is being computed is
// looked at again, to write it.
const predictionPoll = 2 * time.Second

// predict fills status.predictedCompletion and each wave's predictedEnd
// that has not completed: the scenario engine carries on the rollout from
// its status and its members' states (members, as this reconcile leaves
// them) over its pools as the cache holds them, each timed by its own
// rollout history. The forecast runs in the background; until it is done
// the status keeps the last one, and predict reports true (look again
// soon). A forecast that cannot be made (a history that cannot be read)
// leaves the last one.
func (r *FleetRolloutReconciler) predict(ctx context.Context, fr *nodepoolv1.FleetRollout, byRef map[fleet.Ref]*nodepoolv1.NodePool,
	members []nodepoolv1.FleetRolloutPool, store []fleet.Store, now time.Time) bool {
	st := &fr.Status
	if terminal(fr) {
		st.PredictedCompletion = nil
		r.predicted.forget(fr.Name)
		return false
	}
	point := predictionPoint(st)
	last, ok := r.predicted.last(fr.Name, point)
	if ok {
		last.apply(st) // a status write refused keeps what was forecast
		return false
	}
	if !r.predicted.start(fr.Name, point) {
		return true
	}
	state := map[fleet.Ref]nodepoolv1.FleetRolloutPool{}
	for _, m := range members {
		state[fleet.RefOf(m)] = m
	}
	for _, s := range store {
		if m, err := fleet.Decode(s.Namespace, s.Name, s.Value); err == nil {
			state[s.Ref] = m
		}
	}
	in := scenario.ForecastInput{Now: now, Fleet: &scenario.ForecastFleet{Name: fr.Name, Spec: *fr.Spec.DeepCopy(), Status: st.DeepCopy(), Members: state}}
	for ref := range state {
		pool, ok := byRef[ref]
		if !ok {
			continue
		}
		past, err := listing.RecentRollouts(ctx, r.Client, pool)
		if err != nil {
			logr.FromContextOrDiscard(ctx).Info("no forecast of the fleet rollout: a pool's history cannot be read", "pool", ref.String(), "error", err.Error())
			r.predicted.done(fr.Name)
			return false
		}
		machines := pool.Status.DesiredReplicas
		if machines == 0 {
			machines = poolmath.DesiredReplicas(&pool.Spec, &pool.Status.Replicas)
		}
		// The forecast reads the pool's halt (scenario.HaltOf, from
		// status.rollout) and the requests it holds from the pool.
		fp := scenario.ForecastPool{Pool: pool.DeepCopy(), Machines: machines, Past: past, Change: scenario.ChangesOf(pool.Status.PendingManagementChanges)}
		in.Fleet.Pools = append(in.Fleet.Pools, ref)
		in.Pools = append(in.Pools, fp)
	}
	name := fr.Name
	go func() {
		defer r.predicted.done(name)
		fc := scenario.RunForecast(in)
		v := prediction{point: point, waves: map[int32]*metav1.Time{}}
		if fc.FleetEnd != nil {
			t := metav1.NewTime(*fc.FleetEnd)
			v.completion = &t
		}
		for _, w := range fc.Waves {
			if w.End != nil {
				t := metav1.NewTime(*w.End)
				v.waves[w.Wave] = &t
			}
		}
		r.predicted.keep(name, v)
	}()
	return true
}
