package fleet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

func waves(ws ...any) []intstr.IntOrString {
	var out []intstr.IntOrString
	for _, w := range ws {
		switch v := w.(type) {
		case int:
			out = append(out, intstr.FromInt32(int32(v)))
		case string:
			out = append(out, intstr.FromString(v))
		}
	}
	return out
}

func TestWaveSizesAreCumulativeAndPercentagesRoundUp(t *testing.T) {
	cases := []struct {
		name  string
		waves []intstr.IntOrString
		n     int
		want  []int
	}{
		{"1, 25%, 100% of 20", waves(1, "25%", "100%"), 20, []int{1, 4, 15}},
		{"1, 10%, 100% of 1000", waves(1, "10%", "100%"), 1000, []int{1, 99, 900}},
		{"a percentage rounds up", waves("10%", "100%"), 15, []int{2, 13}},
		{"a single pool fills the first wave only", waves(1, "25%", "100%"), 1, []int{1, 0, 0}},
		{"a count above the pools is capped", waves(50), 3, []int{3}},
		{"a wave not above the previous one is empty", waves(10, 5, "50%", "100%"), 20, []int{10, 0, 0, 10}},
		{"pools beyond the last wave are in none", waves(1, "50%"), 10, []int{1, 4}},
		{"no pools", waves(1, "100%"), 0, []int{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := WaveSizes(tc.waves, tc.n); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTheSelectionIsFixedInNameOrderWithItsWaves(t *testing.T) {
	refs := []Ref{{"b", "p1"}, {"a", "p2"}, {"a", "p1"}, {"c", "p0"}}
	pools, rows := Assign(refs, waves(1, "50%"))
	var got []string
	for _, p := range pools {
		got = append(got, fmt.Sprintf("%s/%s@%d:%s", p.Namespace, p.Name, p.Wave, p.State))
	}
	want := []string{"a/p1@1:Pending", "a/p2@2:Pending"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (sorted; pools beyond the last wave left out)", got, want)
	}
	if len(rows) != 2 || rows[0].Pools != 1 || rows[1].Pools != 1 || rows[1].Pending != 1 {
		t.Fatalf("rows %+v", rows)
	}
}

// fleetSim is a fleet rollout over n pools, every pool with drift, ready
// and settled, stepped through Decide as the controller does.
type fleetSim struct {
	t     *testing.T
	in    Input
	now   time.Time
	pools map[Ref]*Pool
	// kept is each pool's fleet-rollout state annotation.
	kept map[Ref]string
	last Result
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newSim(t *testing.T, n int, spec nodepoolv1.FleetRolloutSpec) *fleetSim {
	s := &fleetSim{t: t, now: t0, pools: map[Ref]*Pool{}, kept: map[Ref]string{}}
	var refs []Ref
	for i := range n {
		r := Ref{Namespace: fmt.Sprintf("ns-%02d", i), Name: "workers"}
		refs = append(refs, r)
		s.pools[r] = &Pool{Exists: true, HasDrift: true, Ready: true, Settled: true, Replicas: 1}
	}
	st, members := Start(refs, spec.Waves, metav1.NewTime(t0))
	for _, m := range members {
		s.kept[RefOf(m)] = Encode(m)
	}
	s.in = Input{Name: "proxy-fix", Spec: spec, Generation: 1, Status: st}
	return s
}

func ref(i int) Ref { return Ref{Namespace: fmt.Sprintf("ns-%02d", i), Name: "workers"} }

// step runs Decide and applies its triggers and releases to the
// observations, as the controller's writes would.
func (s *fleetSim) step() Result {
	s.in.Now = s.now
	s.in.Pools = map[Ref]Pool{}
	s.in.Members = nil
	for r, p := range s.pools {
		s.in.Pools[r] = *p
		if v, ok := s.kept[r]; ok { // a deleted pool took its annotation along
			m, err := Decode(r.Namespace, r.Name, v)
			if err != nil {
				s.t.Fatal(err)
			}
			s.in.Members = append(s.in.Members, m)
		}
	}
	res := Decide(s.in)
	s.in.Status = res.Status
	for _, st := range res.Store {
		s.kept[st.Ref] = st.Value
	}
	for _, tr := range res.Triggers {
		p := s.pools[tr.Ref]
		p.Fleet, p.At = s.in.Name, tr.At.Format(time.RFC3339)
	}
	for _, rl := range res.Releases {
		p := s.pools[rl.Ref]
		p.Fleet = ""
		if rl.At != nil {
			p.At = ""
		}
	}
	s.last = res
	return res
}

// roll makes a triggered pool start (a history record in progress) and
// complete its rollout.
func (s *fleetSim) start(r Ref, revision int64) {
	s.pools[r].Record = &Record{Revision: revision, Outcome: "InProgress"}
	s.pools[r].Settled = false
}

func (s *fleetSim) complete(r Ref) {
	p := s.pools[r]
	p.Record.Outcome, p.Settled, p.HasDrift = OutcomeComplete, true, false
}

func (s *fleetSim) state(r Ref) nodepoolv1.FleetRolloutPool {
	for _, p := range s.last.Pools {
		if RefOf(p) == r {
			return p
		}
	}
	s.t.Fatalf("%s not in the rollout", r)
	return nodepoolv1.FleetRolloutPool{}
}

func (s *fleetSim) states() string {
	var out []string
	for _, p := range s.last.Pools {
		out = append(out, fmt.Sprintf("%s@%d=%s", p.Namespace, p.Wave, p.State))
	}
	return strings.Join(out, " ")
}

func triggered(res Result) []Ref {
	var out []Ref
	for _, tr := range res.Triggers {
		if !tr.Retry {
			out = append(out, tr.Ref)
		}
	}
	return out
}

func (s *fleetSim) wantPhase(want nodepoolv1.FleetRolloutPhase) {
	s.t.Helper()
	if s.in.Status.Phase != want {
		s.t.Fatalf("phase %s (%s), want %s; pools %s", s.in.Status.Phase, s.in.Status.Message, want, s.states())
	}
}

func (s *fleetSim) finish(rs ...Ref) {
	for i, r := range rs {
		s.start(r, int64(10+i))
		s.complete(r)
	}
}

func spec(ws []intstr.IntOrString, soak time.Duration) nodepoolv1.FleetRolloutSpec {
	return nodepoolv1.FleetRolloutSpec{Waves: ws, Soak: &metav1.Duration{Duration: soak}, Action: nodepoolv1.FleetActionApplyPending, HeldPools: nodepoolv1.HeldPoolWait}
}

func TestALaterWaveStartsOnlyAfterTheEarlierOneCompletedAndSoaked(t *testing.T) {
	s := newSim(t, 20, spec(waves(1, "25%", "100%"), 10*time.Minute))
	res := s.step()
	if got := triggered(res); !slices.Equal(got, []Ref{ref(0)}) {
		t.Fatalf("wave 1 triggered %v, want only %s", got, ref(0))
	}
	if at := res.Triggers[0].At; !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("trigger time %s, want the next whole second", at)
	}
	s.wantPhase(nodepoolv1.FleetPhaseProgressing)
	if s.state(ref(1)).State != nodepoolv1.FleetPoolPending || s.in.Status.Waves[0].Rolling != 1 || s.in.Status.Waves[1].Pending != 4 {
		t.Fatalf("counts %+v; pools %s", s.in.Status.Waves, s.states())
	}
	// Rolling, then complete: the soak starts.
	s.start(ref(0), 3)
	s.now = s.now.Add(time.Minute)
	if got := triggered(s.step()); len(got) != 0 {
		t.Fatalf("triggered %v while wave 1 rolls", got)
	}
	s.complete(ref(0))
	s.now = s.now.Add(time.Minute)
	res = s.step()
	s.wantPhase(nodepoolv1.FleetPhaseSoaking)
	if len(triggered(res)) != 0 || res.RequeueAfter != 10*time.Minute {
		t.Fatalf("soaking: triggered %v, requeue %s (want 10m)", triggered(res), res.RequeueAfter)
	}
	if p := s.state(ref(0)); p.State != nodepoolv1.FleetPoolDone || p.Revision != 3 {
		t.Fatalf("wave 1 pool %+v", p)
	}
	if len(res.Releases) != 1 || res.Releases[0].At != nil {
		t.Fatalf("a done pool is released, keeping its apply-pending time: %+v", res.Releases)
	}
	s.now = s.now.Add(9 * time.Minute)
	if res := s.step(); len(triggered(res)) != 0 || res.RequeueAfter != time.Minute {
		t.Fatalf("a minute before the soak ends: triggered %v, requeue %s", triggered(res), res.RequeueAfter)
	}
	s.now = s.now.Add(time.Minute)
	res = s.step()
	if got := triggered(res); !slices.Equal(got, []Ref{ref(1), ref(2), ref(3), ref(4)}) {
		t.Fatalf("wave 2 triggered %v", got)
	}
	if w := s.in.Status.Waves[1]; w.StartedAt == nil || !w.StartedAt.Time.Equal(s.now) || s.in.Status.CurrentWave != 2 {
		t.Fatalf("wave 2 %+v, current %d", w, s.in.Status.CurrentWave)
	}
	s.finish(ref(1), ref(2), ref(3), ref(4))
	s.step()
	s.wantPhase(nodepoolv1.FleetPhaseSoaking)
	s.now = s.now.Add(10 * time.Minute)
	if got := triggered(s.step()); len(got) != 15 {
		t.Fatalf("wave 3 triggered %d pools, want 15", len(got))
	}
	var rest []Ref
	for i := 5; i < 20; i++ {
		rest = append(rest, ref(i))
	}
	s.finish(rest...)
	s.step()
	s.wantPhase(nodepoolv1.FleetPhaseComplete)
	if s.in.Status.Message != "complete: 20 pools done, 0 skipped" || s.in.Status.CompletedAt == nil {
		t.Fatalf("status %q", s.in.Status.Message)
	}
}

func TestWithoutASoakTheNextWaveStartsAtOnce(t *testing.T) {
	s := newSim(t, 4, spec(waves(1, "100%"), 0))
	s.step()
	s.finish(ref(0))
	if got := triggered(s.step()); len(got) != 3 {
		t.Fatalf("triggered %v, want the 3 pools of wave 2 at once", got)
	}
}

func TestMaxConcurrentCapsThePoolsRollingAtOnce(t *testing.T) {
	sp := spec(waves("100%"), 0)
	sp.MaxConcurrent = ptr.To[int32](2)
	s := newSim(t, 5, sp)
	if got := triggered(s.step()); len(got) != 2 {
		t.Fatalf("triggered %v, want 2", got)
	}
	if p := s.state(ref(2)); p.State != nodepoolv1.FleetPoolWaiting || !strings.Contains(p.Message, "free slot") {
		t.Fatalf("third pool %+v", p)
	}
	if got := triggered(s.step()); len(got) != 0 {
		t.Fatalf("triggered %v with no free slot", got)
	}
	s.finish(ref(0))
	if got := triggered(s.step()); !slices.Equal(got, []Ref{ref(2)}) {
		t.Fatalf("triggered %v, want %s in the freed slot", got, ref(2))
	}
}

func TestApplyPendingSkipsPoolsWithoutDriftAndRestartRollsThem(t *testing.T) {
	for _, action := range []nodepoolv1.FleetRolloutAction{nodepoolv1.FleetActionApplyPending, nodepoolv1.FleetActionRestart} {
		t.Run(string(action), func(t *testing.T) {
			sp := spec(waves("100%"), 0)
			sp.Action = action
			s := newSim(t, 2, sp)
			s.pools[ref(1)].HasDrift = false
			got := triggered(s.step())
			p := s.state(ref(1))
			if action == nodepoolv1.FleetActionApplyPending {
				if len(got) != 1 || p.State != nodepoolv1.FleetPoolSkipped || p.Message != "no pending platform drift" {
					t.Fatalf("triggered %v; pool without drift %+v", got, p)
				}
				return
			}
			if len(got) != 2 || p.State != nodepoolv1.FleetPoolRolling {
				t.Fatalf("restart triggered %v; pool without drift %+v", got, p)
			}
		})
	}
}

func TestAPoolInARolloutOfItsOwnWaitsForItToFinish(t *testing.T) {
	s := newSim(t, 1, spec(waves("100%"), 0))
	s.pools[ref(0)].Updating = true
	if got := triggered(s.step()); len(got) != 0 {
		t.Fatalf("triggered %v while the pool rolls on its own", got)
	}
	s.pools[ref(0)].Updating, s.pools[ref(0)].HasDrift = false, false
	s.step()
	if p := s.state(ref(0)); p.State != nodepoolv1.FleetPoolSkipped {
		t.Fatalf("its own rollout applied the drift: %+v", p)
	}
	s.wantPhase(nodepoolv1.FleetPhaseComplete)
}

func TestHeldPoolsAreWaitedForOrSkippedAsConfigured(t *testing.T) {
	window := &Condition{Reason: nodepoolv1.ReasonOutsideMaintenanceWindow, Message: "the next window opens at 2026-12-02T02:00:00Z"}
	exclusion := &Condition{Reason: nodepoolv1.ReasonInMaintenanceExclusion, Message: "exclusion black-friday until 2026-12-03T00:00:00Z"}
	cases := []struct {
		name   string
		policy nodepoolv1.HeldPoolPolicy
		hold   func(*Pool)
		want   nodepoolv1.FleetPoolState
		msg    string
	}{
		{"outside its window, Wait", nodepoolv1.HeldPoolWait, func(p *Pool) { p.Held = window }, nodepoolv1.FleetPoolWaiting, "OutsideMaintenanceWindow"},
		{"outside its window, Skip", nodepoolv1.HeldPoolSkip, func(p *Pool) { p.Held = window }, nodepoolv1.FleetPoolSkipped, "OutsideMaintenanceWindow"},
		{"in an exclusion, Wait", nodepoolv1.HeldPoolWait, func(p *Pool) { p.Held = exclusion }, nodepoolv1.FleetPoolWaiting, "InMaintenanceExclusion"},
		{"in an exclusion, Skip", nodepoolv1.HeldPoolSkip, func(p *Pool) { p.Held = exclusion }, nodepoolv1.FleetPoolSkipped, "InMaintenanceExclusion"},
		{"paused, Wait", nodepoolv1.HeldPoolWait, func(p *Pool) { p.Paused = true }, nodepoolv1.FleetPoolWaiting, "paused"},
		{"paused, Skip", nodepoolv1.HeldPoolSkip, func(p *Pool) { p.Paused = true }, nodepoolv1.FleetPoolSkipped, "paused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := spec(waves(1, "100%"), 0)
			sp.HeldPools = tc.policy
			s := newSim(t, 2, sp)
			tc.hold(s.pools[ref(0)])
			got := triggered(s.step())
			p := s.state(ref(0))
			if p.State != tc.want || !strings.Contains(p.Message, tc.msg) || slices.Contains(got, ref(0)) {
				t.Fatalf("held pool %+v (triggered %v)", p, got)
			}
			if tc.want == nodepoolv1.FleetPoolWaiting {
				if slices.Contains(got, ref(1)) {
					t.Fatalf("wave 2 started while wave 1 waits for its held pool")
				}
				// The window opens: the pool rolls, then wave 2.
				*s.pools[ref(0)] = Pool{Exists: true, HasDrift: true, Ready: true, Settled: true, Replicas: 1}
				if got := triggered(s.step()); !slices.Equal(got, []Ref{ref(0)}) {
					t.Fatalf("once no longer held: triggered %v", got)
				}
				s.finish(ref(0))
				got = triggered(s.step())
			}
			// A skipped pool completes its wave at once (no soak here).
			if !slices.Equal(got, []Ref{ref(1)}) {
				t.Fatalf("wave 2 triggered %v", got)
			}
		})
	}
}

func TestAPoolHeldAfterItsTriggerKeepsItsSlotOrIsReleasedOnSkip(t *testing.T) {
	for _, policy := range []nodepoolv1.HeldPoolPolicy{nodepoolv1.HeldPoolWait, nodepoolv1.HeldPoolSkip} {
		t.Run(string(policy), func(t *testing.T) {
			sp := spec(waves("100%"), 0)
			sp.HeldPools = policy
			s := newSim(t, 1, sp)
			at := s.step().Triggers[0].At
			// The pool's engine holds the forced rollout for its window.
			s.pools[ref(0)].Held = &Condition{Reason: nodepoolv1.ReasonOutsideMaintenanceWindow, Message: "next window at 02:00"}
			res := s.step()
			p := s.state(ref(0))
			if policy == nodepoolv1.HeldPoolWait {
				if p.State != nodepoolv1.FleetPoolRolling || !strings.Contains(p.Message, "next window") || len(res.Releases) != 0 || len(res.Triggers) != 0 {
					t.Fatalf("pool %+v, releases %+v, triggers %+v", p, res.Releases, res.Triggers)
				}
				return
			}
			if p.State != nodepoolv1.FleetPoolSkipped || len(res.Releases) != 1 || res.Releases[0].At == nil || !res.Releases[0].At.Equal(at) {
				t.Fatalf("pool %+v, releases %+v: a skipped pool that never started loses its apply-pending time", p, res.Releases)
			}
			s.wantPhase(nodepoolv1.FleetPhaseComplete)
		})
	}
}

func TestAFailedPoolHaltsTheRolloutUntilResumedAfterTheFix(t *testing.T) {
	s := newSim(t, 20, spec(waves(1, "25%", "100%"), 0))
	s.step()
	s.finish(ref(0))
	s.step() // wave 2 triggered
	s.start(ref(1), 4)
	s.pools[ref(1)].Unhealthy = &Condition{Reason: nodepoolv1.ReasonRolloutHalted, Message: "machine workers-abc: node not ready after 10m"}
	s.finish(ref(2), ref(3), ref(4))
	res := s.step()
	s.wantPhase(nodepoolv1.FleetPhaseHalted)
	if !strings.Contains(s.in.Status.Message, "ns-01/workers") || !strings.Contains(s.in.Status.Message, "RolloutHalted") || s.in.Status.HaltedAt == nil {
		t.Fatalf("halt message %q names the pool and reason", s.in.Status.Message)
	}
	if len(triggered(res)) != 0 || s.state(ref(5)).State != nodepoolv1.FleetPoolPending || s.in.Status.Waves[1].Failed != 1 {
		t.Fatalf("triggered %v; wave 3 %s; waves %+v", triggered(res), s.state(ref(5)).State, s.in.Status.Waves)
	}
	// The owner fixes the pool: its rollout is superseded and settles. The
	// halt holds until resumed.
	p := s.pools[ref(1)]
	p.Unhealthy, p.Record.Outcome, p.Settled, p.HasDrift = nil, OutcomeSuperseded, true, false
	s.now = s.now.Add(time.Minute)
	if res := s.step(); len(triggered(res)) != 0 {
		t.Fatalf("triggered %v before a resume", triggered(res))
	}
	s.wantPhase(nodepoolv1.FleetPhaseHalted)
	if st := s.state(ref(1)); st.State != nodepoolv1.FleetPoolDone {
		t.Fatalf("the fixed pool %+v", st)
	}
	s.in.Spec.ResumedAt = &metav1.Time{Time: s.now.Add(time.Second)}
	s.now = s.now.Add(2 * time.Second)
	if got := triggered(s.step()); len(got) != 15 {
		t.Fatalf("after the resume wave 3 triggered %d pools, want 15", len(got))
	}
	if s.in.Status.HaltedAt != nil {
		t.Fatalf("the halt is cleared")
	}
}

func TestAResumeWhileAPoolStillFailsHaltsAgain(t *testing.T) {
	s := newSim(t, 3, spec(waves(1, "100%"), 0))
	s.step()
	s.start(ref(0), 2)
	s.pools[ref(0)].Unhealthy = &Condition{Reason: nodepoolv1.ReasonProgressDeadlineExceeded, Message: "no progress"}
	s.step()
	s.in.Spec.ResumedAt = &metav1.Time{Time: s.now.Add(time.Second)}
	s.now = s.now.Add(5 * time.Second)
	if got := triggered(s.step()); len(got) != 0 {
		t.Fatalf("triggered %v", got)
	}
	s.wantPhase(nodepoolv1.FleetPhaseHalted)
	if !s.in.Status.HaltedAt.After(s.in.Spec.ResumedAt.Time) {
		t.Fatalf("halted again after the resume")
	}
}

func TestFailuresDoNotHaltWhenRolloutUnhealthyIsOff(t *testing.T) {
	sp := spec(waves(1, "100%"), 0)
	sp.StopOn.RolloutUnhealthy = ptr.To(false)
	s := newSim(t, 3, sp)
	s.step()
	s.start(ref(0), 2)
	s.pools[ref(0)].Unhealthy = &Condition{Reason: nodepoolv1.ReasonRollingBack, Message: "rolling back"}
	if got := triggered(s.step()); len(got) != 2 {
		t.Fatalf("triggered %v, want wave 2", got)
	}
	s.finish(ref(1), ref(2))
	s.step()
	s.wantPhase(nodepoolv1.FleetPhaseComplete)
	if !strings.Contains(s.in.Status.Message, "1 failed") {
		t.Fatalf("message %q", s.in.Status.Message)
	}
}

func TestMoreUnhealthyPoolsThanAllowedHaltTheRollout(t *testing.T) {
	sp := spec(waves(2, "100%"), 0)
	sp.StopOn.MaxUnhealthyPools = ptr.To[int32](1)
	s := newSim(t, 4, sp)
	s.step()
	s.finish(ref(0), ref(1))
	s.pools[ref(0)].Ready = false
	s.step()
	s.wantPhase(nodepoolv1.FleetPhaseProgressing) // one unhealthy is allowed
	s.pools[ref(1)].Ready = false
	s.step()
	s.wantPhase(nodepoolv1.FleetPhaseHalted)
	if !strings.Contains(s.in.Status.Message, "2 pools are unhealthy, more than stopOn.maxUnhealthyPools (1)") {
		t.Fatalf("message %q", s.in.Status.Message)
	}
}

func TestAPausedRolloutTriggersNothingAndContinuesOnResume(t *testing.T) {
	s := newSim(t, 3, spec(waves(1, "100%"), 0))
	s.step()
	s.in.Spec.Paused = true
	s.finish(ref(0))
	res := s.step()
	s.wantPhase(nodepoolv1.FleetPhasePaused)
	if len(triggered(res)) != 0 || s.state(ref(0)).State != nodepoolv1.FleetPoolDone {
		t.Fatalf("paused: triggered %v; the rolling pool is still followed: %+v", triggered(res), s.state(ref(0)))
	}
	s.in.Spec.Paused = false
	if got := triggered(s.step()); len(got) != 2 {
		t.Fatalf("resumed: triggered %v", got)
	}
}

func TestACancelledRolloutReleasesPoolsThatHaveNotStarted(t *testing.T) {
	sp := spec(waves(2, "100%"), 0)
	s := newSim(t, 4, sp)
	s.step()
	s.start(ref(0), 2) // ref(1) is triggered, its rollout not started
	s.in.Spec.Cancelled = true
	res := s.step()
	s.wantPhase(nodepoolv1.FleetPhaseCancelled)
	if st := s.state(ref(0)); st.State != nodepoolv1.FleetPoolRolling {
		t.Fatalf("a started pool finishes: %+v", st)
	}
	if st := s.state(ref(1)); st.State != nodepoolv1.FleetPoolSkipped {
		t.Fatalf("an unstarted pool is skipped: %+v", st)
	}
	if len(res.Releases) != 1 || res.Releases[0].Ref != ref(1) || res.Releases[0].At == nil {
		t.Fatalf("releases %+v", res.Releases)
	}
	if st := s.state(ref(2)); st.State != nodepoolv1.FleetPoolSkipped {
		t.Fatalf("a pending pool is skipped: %+v", st)
	}
	// Nothing moves afterwards.
	s.complete(ref(0))
	if res := s.step(); len(res.Triggers) != 0 || s.in.Status.Phase != nodepoolv1.FleetPhaseCancelled {
		t.Fatalf("after the cancel: %+v", res)
	}
}

func TestARestartedControllerWritesTheRecordedTimeAgainAndNeverASecondOne(t *testing.T) {
	s := newSim(t, 2, spec(waves("100%"), 0))
	first := s.step()
	// The status was written, the pool annotation was not (a crash).
	s.pools[ref(0)].Fleet, s.pools[ref(0)].At = "", ""
	s.now = s.now.Add(30 * time.Second)
	res := s.step()
	if len(res.Triggers) != 1 || !res.Triggers[0].Retry || res.Triggers[0].Ref != ref(0) || !res.Triggers[0].At.Equal(first.Triggers[0].At) {
		t.Fatalf("retry %+v, want the first time %s again", res.Triggers, first.Triggers[0].At)
	}
	// Annotated and recorded: nothing more is written.
	s.start(ref(0), 7)
	s.start(ref(1), 7)
	if res := s.step(); len(res.Triggers) != 0 {
		t.Fatalf("triggers %+v after the pools started", res.Triggers)
	}
}

func TestDeletedPoolsAndPoolsWithNoMachineEndTheirPart(t *testing.T) {
	s := newSim(t, 3, spec(waves("100%"), 0))
	s.pools[ref(0)].Exists = false
	s.step()
	if st := s.state(ref(0)); st.State != nodepoolv1.FleetPoolSkipped || st.Message != "the pool was deleted" {
		t.Fatalf("deleted before its turn: %+v", st)
	}
	delete(s.pools, ref(1))
	s.pools[ref(2)].Replicas = 0
	s.step()
	// A pool deleted takes its kept state along: it counts as skipped.
	if w := s.in.Status.Waves[0]; w.Skipped != 2 || w.Pools != 3 {
		t.Fatalf("deleted after its trigger: wave %+v", w)
	}
	if st := s.state(ref(2)); st.State != nodepoolv1.FleetPoolDone || st.Message != "no machine to replace" {
		t.Fatalf("a pool of no machines: %+v", st)
	}
	s.wantPhase(nodepoolv1.FleetPhaseComplete)
}

func TestAPoolAnotherFleetRolloutDrivesWaits(t *testing.T) {
	s := newSim(t, 1, spec(waves("100%"), 0))
	s.pools[ref(0)].Fleet = "other"
	if got := triggered(s.step()); len(got) != 0 || !strings.Contains(s.state(ref(0)).Message, "fleet rollout other") {
		t.Fatalf("triggered %v; %+v", got, s.state(ref(0)))
	}
}

func TestConditionsFollowThePhase(t *testing.T) {
	s := newSim(t, 2, spec(waves(1, "100%"), time.Hour))
	s.step()
	s.finish(ref(0))
	s.step()
	s.wantPhase(nodepoolv1.FleetPhaseSoaking)
	for _, c := range s.in.Status.Conditions {
		if c.Type == nodepoolv1.FleetConditionProgressing && (c.Status != metav1.ConditionTrue || c.Reason != "Soaking") {
			t.Fatalf("Progressing %+v", c)
		}
		if c.Type == nodepoolv1.FleetConditionHalted && c.Status != metav1.ConditionFalse {
			t.Fatalf("Halted %+v", c)
		}
	}
}

// A fleet pool held by its window, whose drift deadline (or a newer
// rolloutAfter, or a hand apply-pending) makes a newer request that the
// pool carries out: what the fleet asked holds, so the pool is done and
// frees its slot.
func TestAPoolThatCarriesOutTheTriggerUnderANewerRequestIsDone(t *testing.T) {
	for _, initiator := range []string{"deadline", "restart", "platform"} {
		t.Run(initiator, func(t *testing.T) {
			sp := spec(waves(1, "100%"), 0)
			sp.MaxConcurrent = ptr.To[int32](1)
			s := newSim(t, 2, sp)
			at := s.step().Triggers[0].At
			p := s.pools[ref(0)]
			p.Held = &Condition{Reason: nodepoolv1.ReasonOutsideMaintenanceWindow, Message: "next window at 02:00"}
			s.step()
			// The window opens; the newer request is the one carried out.
			newer := at.Add(3 * time.Hour)
			p.Held, p.Settled = nil, false
			p.Record = &Record{Revision: 6, Outcome: "InProgress", Initiator: initiator, ForcedAt: &newer}
			s.now = s.now.Add(3 * time.Hour)
			if res := s.step(); len(res.Triggers) != 0 {
				t.Fatalf("triggers %+v while the newer request rolls", res.Triggers)
			}
			if st := s.state(ref(0)); st.State != nodepoolv1.FleetPoolRolling || st.Revision != 6 {
				t.Fatalf("while the newer request rolls: %+v", st)
			}
			p.Record.Outcome, p.Settled, p.HasDrift = OutcomeComplete, true, false
			s.now = s.now.Add(time.Hour)
			got := triggered(s.step())
			if st := s.state(ref(0)); st.State != nodepoolv1.FleetPoolDone || !strings.Contains(st.Message, initiator) {
				t.Fatalf("the pool settled with no drift under revision 6: %+v", st)
			}
			if !slices.Equal(got, []Ref{ref(1)}) {
				t.Fatalf("wave 2 triggered %v, want %s (wave 1 complete, its slot free)", got, ref(1))
			}
		})
	}
}

// An operator's apply-pending --outside-windows on a pool the fleet
// triggered and that is still held wins: the fleet does not write its
// older time back, records the pool as taken over, and counts it done
// once what it asked holds.
func TestAnOperatorsLaterApplyPendingTakesThePoolOver(t *testing.T) {
	sp := spec(waves(1, "100%"), 0)
	sp.MaxConcurrent = ptr.To[int32](1)
	s := newSim(t, 2, sp)
	at := s.step().Triggers[0].At
	p := s.pools[ref(0)]
	p.Held = &Condition{Reason: nodepoolv1.ReasonOutsideMaintenanceWindow, Message: "next window at 02:00"}
	s.step()
	// kubectl nodepool rollout apply-pending --outside-windows --reason ...
	s.now = s.now.Add(10 * time.Minute)
	mine := poolmath.ForcedNow(s.now)
	p.At, p.Fleet, p.OutsideReason = mine.Format(time.RFC3339), "", "CVE-2026-1234"
	res := s.step()
	for _, tr := range res.Triggers {
		if tr.Ref == ref(0) {
			t.Fatalf("the fleet wrote its time %s back over the operator's %s: %+v", at, mine, tr)
		}
	}
	st := s.state(ref(0))
	if st.State != nodepoolv1.FleetPoolTakenOver || !strings.Contains(st.Message, "CVE-2026-1234") || !strings.Contains(st.Message, mine.Format(time.RFC3339)) {
		t.Fatalf("taken over: %+v", st)
	}
	if s.in.Status.Waves[0].TakenOver != 1 || len(triggered(res)) != 0 {
		t.Fatalf("waves %+v; triggered %v (the taken-over pool keeps its slot while it rolls)", s.in.Status.Waves, triggered(res))
	}
	if att := s.in.Status.Attention; len(att) != 1 || att[0].State != nodepoolv1.FleetPoolTakenOver || RefOf(att[0]) != ref(0) {
		t.Fatalf("the taken-over pool needs a person's eye: attention %+v", att)
	}
	if m, err := Decode(ref(0).Namespace, ref(0).Name, s.kept[ref(0)]); err != nil || m.State != nodepoolv1.FleetPoolTakenOver || !strings.Contains(m.Message, "CVE-2026-1234") {
		t.Fatalf("the pool keeps the take-over: %+v, %v", m, err)
	}
	// The operator's rollout runs and completes.
	p.Held, p.Settled = nil, false
	p.Record = &Record{Revision: 8, Outcome: "InProgress", Initiator: "platform", ForcedAt: &mine}
	s.step()
	if st := s.state(ref(0)); st.State != nodepoolv1.FleetPoolTakenOver {
		t.Fatalf("while the operator's rollout runs: %+v", st)
	}
	p.Record.Outcome, p.Settled, p.HasDrift = OutcomeComplete, true, false
	got := triggered(s.step())
	if st := s.state(ref(0)); st.State != nodepoolv1.FleetPoolDone || !strings.Contains(st.Message, "taken over") {
		t.Fatalf("what the fleet asked holds: %+v", st)
	}
	if !slices.Equal(got, []Ref{ref(1)}) {
		t.Fatalf("wave 2 triggered %v", got)
	}
}

// A write of the fleet's time that did not happen is still retried: an
// apply-pending time older than the trigger (or none) is not a take-over.
func TestAnOlderApplyPendingIsNotATakeOver(t *testing.T) {
	s := newSim(t, 1, spec(waves("100%"), 0))
	at := s.step().Triggers[0].At
	s.pools[ref(0)].Fleet, s.pools[ref(0)].At = "", at.Add(-time.Hour).Format(time.RFC3339)
	res := s.step()
	if len(res.Triggers) != 1 || !res.Triggers[0].Retry || !res.Triggers[0].At.Equal(at) {
		t.Fatalf("retry %+v", res.Triggers)
	}
}
