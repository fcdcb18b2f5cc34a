package rollout

import (
	"time"

	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// nextShape is what a rollout of the pool does now: the machines the
// decision's rollout replaces (Decision.Machines: every machine the pool
// runs or wants or, for a forced rollout, those created before its time)
// or, when it names none, every machine the pool wants, in the rounds and
// soaks the spec declares (poolmath.ShapeOf). False when it cannot be
// told (OnDelete).
func nextShape(in Input, d Decision) (poolmath.Shape, bool) {
	if d.Machines > 0 {
		return poolmath.ShapeOf(&in.Pool.Spec, d.Replicas, d.Machines)
	}
	machines := d.Replicas
	if f := d.Forced; f != nil && !f.At.IsZero() && in.MachineDeployment != nil {
		if n := poolmath.CreatedBefore(in.MachineDeployment.MachinesCreated, f.At); n > 0 && n < machines {
			machines = n
		}
	}
	return poolmath.ShapeOf(&in.Pool.Spec, d.Replicas, machines)
}

// fitIn says how long a rollout of the pool takes, predicted from the
// pool's recent rollouts scaled to what this one does, and whether it fits
// in left (the time left in the open window, or the next window's length),
// given what its drains are predicted to meet (drain_predict.go); "" when
// nothing can be told.
func fitIn(in Input, d Decision, left time.Duration) string {
	var pred poolmath.Prediction
	base := ""
	if s, ok := nextShape(in, d); ok {
		pred = poolmath.Predict(s, in.RecentRollouts)
		base = pred.Describe(left)
	}
	if left <= 0 {
		return base
	}
	return fitWithDrains(base, pred, d.DrainForecast, left)
}

// recordShape writes on the record of a rollout that starts what it sets
// out to do, so that its duration predicts later ones of another size.
func recordShape(in Input, d Decision, p *Plan) {
	if p.Record == nil {
		return
	}
	if s, ok := nextShape(in, d); ok {
		p.Record.Machines, p.Record.Rounds, p.Record.Soak = s.Machines, s.Rounds, s.Soak
	}
}
