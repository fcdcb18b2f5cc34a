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
