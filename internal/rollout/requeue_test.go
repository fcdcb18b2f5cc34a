package rollout

import (
	"testing"
	"time"

	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// A pool whose machines are not all ready is looked at again within
// NotReadyPollInterval, not only at the resync: its rollout is complete on
// record (a new pool's is at once), so nothing else polls it, and a missed
// Node or Machine event would otherwise leave a health-gated machine
// without its gate until the resync.
func TestAPoolWithMachinesNotReadyIsLookedAtAgainSoon(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	in.Settings.ResyncPeriod = 5 * time.Minute
	in.Settings.TokenTTL = 24 * time.Hour
	if p := Decide(in); p.RequeueAfter > 0 && p.RequeueAfter <= NotReadyPollInterval {
		t.Fatalf("a settled, ready pool is requeued after %s; want the resync, not the poll", p.RequeueAfter)
	}
	in.MachineDeployment.ReadyReplicas = 0
	if p := Decide(in); p.RequeueAfter == 0 || p.RequeueAfter > NotReadyPollInterval {
		t.Errorf("a pool with 0 of %d machines ready is requeued after %s, want at most %s", in.MachineDeployment.Replicas, p.RequeueAfter, NotReadyPollInterval)
	}
}

// DueAfter is RequeueAfter without the poll intervals that guard against
// a missed event: the resync for a settled pool, a rollout that starts or
// machines not ready, and the pause's end for a pool paused for an hour;
// it is never later than RequeueAfter's timed part.
func TestDueAfterIsTheRequeueWithoutThePolls(t *testing.T) {
	for _, tc := range []struct {
		name         string
		edit         func(w *inputstest.World, in *Input)
		requeue, due time.Duration
	}{
		{name: "settled", requeue: 10 * time.Minute, due: 10 * time.Minute},
		{name: "a rollout starts", edit: func(w *inputstest.World, in *Input) {
			w.Pool.Spec.Release.Version = "v1.36.4"
		}, requeue: RolloutPollInterval, due: 10 * time.Minute},
		{name: "machines not ready", edit: func(w *inputstest.World, in *Input) {
			in.MachineDeployment.ReadyReplicas = 0
		}, requeue: NotReadyPollInterval, due: 10 * time.Minute},
		{name: "paused for an hour, a rollout waiting", edit: func(w *inputstest.World, in *Input) {
			w.Pool.Spec.Release.Version = "v1.36.4"
			w.Pool.Spec.Management.PausedUntil = in.Now.Add(time.Hour).Format(time.RFC3339)
			in.Settings.ResyncPeriod = 2 * time.Hour
		}, requeue: time.Hour + time.Second, due: time.Hour + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			in := settled(t, w)
			in.Settings.ResyncPeriod = 10 * time.Minute
			in.Settings.TokenTTL = 24 * time.Hour
			if tc.edit != nil {
				tc.edit(w, &in)
				in = relatest(t, in, w)
			}
			p := Decide(in)
			if p.RequeueAfter != tc.requeue || p.DueAfter != tc.due {
				t.Errorf("requeue after %s, due after %s; want %s and %s", p.RequeueAfter, p.DueAfter, tc.requeue, tc.due)
			}
		})
	}
}

// A node update is polled every NodeUpdatePollInterval (its drain moves
// without events), but not while a halt holds: then nothing moves but on
// an agent's or a person's write, which is an event (seed 4686: a halted
// InPlace pool with a node waiting in its update was looked at every 2s
// for hours).
func TestAHaltedNodeUpdateIsNotPolled(t *testing.T) {
	in := Input{Now: t0, Settings: Settings{ResyncPeriod: 10 * time.Minute}}
	p := Plan{UpdateInProgress: true}
	planRequeue(in, &p)
	if p.RequeueAfter != NodeUpdatePollInterval {
		t.Fatalf("a node update in progress is requeued after %s, want %s", p.RequeueAfter, NodeUpdatePollInterval)
	}
	p = Plan{UpdateInProgress: true, Decision: Decision{Health: &HealthState{Phase: HealthHalted}}}
	planRequeue(in, &p)
	if p.RequeueAfter != in.Settings.ResyncPeriod {
		t.Errorf("a halted node update is requeued after %s, want the resync %s", p.RequeueAfter, in.Settings.ResyncPeriod)
	}
}

// A rollout in progress is polled every RolloutPollInterval in its first
// minutes, then every twentieth of its age, never less often than
// MaxRolloutPollInterval: what moves it raises events, so the poll bounds
// only how long a missed one goes unseen, and a fleet of hour-long
// rollouts is not looked at every few seconds a pool. A rollout starting
// now is young whatever the record before it says.
func TestALongRolloutIsPolledLessOften(t *testing.T) {
	for _, tc := range []struct {
		name  string
		age   time.Duration
		start bool
		want  time.Duration
	}{
		{name: "a minute old", age: time.Minute, want: RolloutPollInterval},
		{name: "ten minutes old", age: 10 * time.Minute, want: 30 * time.Second},
		{name: "an hour old", age: time.Hour, want: MaxRolloutPollInterval},
		{name: "a new rollout after an hour-old one", age: time.Hour, start: true, want: RolloutPollInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: t0, Settings: Settings{ResyncPeriod: 10 * time.Minute},
				Current: &CurrentRollout{Revision: 3, Started: t0.Add(-tc.age), InProgress: true}}
			p := Plan{Updating: "replacing machines"}
			if tc.start {
				p.Record = &Record{Started: t0}
			}
			planRequeue(in, &p)
			if p.RequeueAfter != tc.want {
				t.Errorf("requeue after %s, want %s", p.RequeueAfter, tc.want)
			}
		})
	}
	in := Input{Now: t0, Settings: Settings{ResyncPeriod: 10 * time.Minute},
		Current: &CurrentRollout{Revision: 3, Started: t0.Add(-time.Hour)}}
	p := Plan{Updating: "replacing machines"}
	planRequeue(in, &p)
	if p.RequeueAfter != RolloutPollInterval {
		t.Errorf("a rollout the record says ended: requeue after %s, want %s", p.RequeueAfter, RolloutPollInterval)
	}
}
