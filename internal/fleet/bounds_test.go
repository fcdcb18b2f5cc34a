package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// heldMessage is a MaintenanceWindow message of a real pool, 443 bytes.
var heldMessage = func() string {
	m := "outside the maintenance windows: the next window opens at 2026-12-06T02:00:00Z (Europe/Berlin, 0 2 * * 6, 4h); the rollout is predicted to take 1h10m (the last 5 Complete rollouts of this pool: 58m to 1h22m), which fits; exclusions: black-friday 2026-11-27T00:00:00Z to 2026-12-01T00:00:00Z (unbreakable), year-end 2026-12-20T00:00:00Z to 2027-01-04T00:00:00Z; a forced rollout outside them needs --outside-windows with a reason"
	for len(m) < 443 {
		m += "."
	}
	return m[:443]
}()

// A FleetRollout over 10,000 pools, 3,000 of them held with a 443-byte
// window message, keeps its status (the object the controller patches)
// far below etcd's request limit: counts per wave and the pools that need
// a person up to a cap, the per-pool state on the pools.
func TestTheStatusOfAFleetOfTenThousandPoolsStaysUnder256KiB(t *testing.T) {
	sp := spec(waves("100%"), 0)
	sp.MaxConcurrent = ptr.To[int32](100)
	s := newSim(t, 10000, sp)
	for i := range 3000 {
		s.pools[ref(i*3)].Held = &Condition{Reason: nodepoolv1.ReasonOutsideMaintenanceWindow, Message: heldMessage}
	}
	for range 3 {
		s.step()
		s.now = s.now.Add(time.Minute)
	}
	raw, err := json.Marshal(s.in.Status)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 256<<10 {
		t.Fatalf("status is %d bytes, more than 256 KiB", len(raw))
	}
	st := s.in.Status
	if len(st.Attention) != nodepoolv1.FleetAttentionMax || st.AttentionOmitted != 3000-nodepoolv1.FleetAttentionMax {
		t.Fatalf("attention lists %d pools and omits %d, want %d and %d", len(st.Attention), st.AttentionOmitted, nodepoolv1.FleetAttentionMax, 3000-nodepoolv1.FleetAttentionMax)
	}
	if !strings.Contains(st.Attention[0].Message, "OutsideMaintenanceWindow") {
		t.Fatalf("attention[0] %+v", st.Attention[0])
	}
	if w := st.Waves[0]; w.Pools != 10000 || w.Waiting != 10000-100 || w.Rolling != 100 {
		t.Fatalf("wave %+v", w)
	}
	// Every pool's state is still known, from what the pools keep.
	if len(s.last.Pools) != 10000 {
		t.Fatalf("%d pools in the decision, want 10000", len(s.last.Pools))
	}
	// And a pool's annotation stays small: no copied message while it waits.
	for r, v := range s.kept {
		if len(v) > 200 {
			t.Fatalf("%s keeps %d bytes: %s", r, len(v), v)
		}
	}
	t.Logf("status %d bytes for 10,000 pools (3,000 held)", len(raw))
}

// restart is a controller that starts again: it has only what is stored,
// the FleetRollout's status (as JSON) and the pools' annotations.
func (s *fleetSim) restart() {
	raw, err := json.Marshal(s.in.Status)
	if err != nil {
		s.t.Fatal(err)
	}
	var st nodepoolv1.FleetRolloutStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		s.t.Fatal(err)
	}
	s.in = Input{Name: s.in.Name, Spec: s.in.Spec, Generation: s.in.Generation, Status: st}
	s.last = Result{}
}

// The fleet's progress depends only on bounded, stored state: status.pools
// no longer lists the pools; each pool keeps its wave, trigger time and
// end, so a restarted controller neither triggers a pool twice nor
// exceeds maxConcurrent nor forgets a pool, and the waves complete.
func TestAFleetRolloutContinuesFromWhatThePoolsKeepAfterARestart(t *testing.T) {
	sp := spec(waves(2, "100%"), 0)
	sp.MaxConcurrent = ptr.To[int32](2)
	s := newSim(t, 6, sp)
	first := s.step()
	if got := triggered(first); len(got) != 2 {
		t.Fatalf("triggered %v", got)
	}
	if raw, _ := json.Marshal(s.in.Status); strings.Contains(string(raw), "ns-00") {
		t.Fatalf("the status names pools that need no person: %s", raw)
	}
	s.start(ref(0), 3)
	s.restart()
	res := s.step()
	if len(res.Triggers) != 0 {
		t.Fatalf("after a restart: triggers %+v (the pools keep their trigger)", res.Triggers)
	}
	if st := s.state(ref(1)); st.State != nodepoolv1.FleetPoolRolling || !st.TriggeredAt.Time.Equal(first.Triggers[1].At) {
		t.Fatalf("pool 1 after a restart %+v", st)
	}
	// Its apply-pending write was lost: the same time is written again.
	s.pools[ref(1)].At, s.pools[ref(1)].Fleet = "", ""
	s.restart()
	res = s.step()
	if len(res.Triggers) != 1 || !res.Triggers[0].Retry || !res.Triggers[0].At.Equal(first.Triggers[1].At) {
		t.Fatalf("retry %+v", res.Triggers)
	}
	s.complete(ref(0))
	s.finish(ref(1))
	s.restart()
	res = s.step()
	if got := triggered(res); !slices2(got, ref(2), ref(3)) {
		t.Fatalf("wave 2 triggered %v, want 2 pools (maxConcurrent)", got)
	}
	if st := s.state(ref(0)); st.State != nodepoolv1.FleetPoolDone || st.Revision != 3 {
		t.Fatalf("pool 0 %+v", st)
	}
	s.finish(ref(2), ref(3))
	s.restart()
	if got := triggered(s.step()); !slices2(got, ref(4), ref(5)) {
		t.Fatalf("triggered %v", got)
	}
	s.finish(ref(4), ref(5))
	s.restart()
	s.step()
	s.wantPhase(nodepoolv1.FleetPhaseComplete)
	if s.in.Status.Message != "complete: 6 pools done, 0 skipped" {
		t.Fatalf("message %q", s.in.Status.Message)
	}
}

func slices2(got []Ref, want ...Ref) bool { return fmt.Sprint(got) == fmt.Sprint(want) }

// A member's annotation round-trips, and a broken one is refused with
// the field named.
func TestAPoolsKeptFleetStateRoundTrips(t *testing.T) {
	at := metav1.NewTime(t0)
	for _, p := range []nodepoolv1.FleetRolloutPool{
		{Namespace: "a", Name: "w", Wave: 2, State: nodepoolv1.FleetPoolPending},
		{Namespace: "a", Name: "w", Wave: 1, State: nodepoolv1.FleetPoolRolling, TriggeredAt: &at, Revision: 4},
		{Namespace: "a", Name: "w", Wave: 1, State: nodepoolv1.FleetPoolSkipped, Message: "no pending platform drift"},
		{Namespace: "a", Name: "w", Wave: 3, State: nodepoolv1.FleetPoolTakenOver, TriggeredAt: &at, Message: "taken over"},
	} {
		got, err := Decode("a", "w", Encode(p))
		if err != nil || Encode(got) != Encode(p) || got.State != p.State {
			t.Fatalf("%+v: got %+v, %v", p, got, err)
		}
	}
	for value, want := range map[string]string{
		`{"wave":0,"state":"Pending"}`: "wave",
		`{"wave":1,"state":"Nope"}`:    "state",
		`{"wave":1,"state":"Rolling"}`: "triggeredAt",
		`not json`:                     "fleet rollout state",
	} {
		if _, err := Decode("a", "w", value); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want an error naming %s", value, err, want)
		}
	}
}
