package scenario

import (
	"cmp"
	"container/heap"
	"slices"
	"time"
)

// A world's step runs the pools that something is due for: those watched
// (touch) and those whose own next event (Pool.at) has come. The world
// keeps them in a queue by that time and a list of the touched, so a
// step of a world of n pools costs what is due, not n: a forecast of a
// fleet rollout over 10,000 pools is one world that steps at each of its
// pools' events.

// touch marks the pool watched: something its controller watches changed.
func (p *Pool) touch() {
	if !p.watch {
		p.watch = true
		p.w.touched = append(p.w.touched, p)
	}
}

// schedule sets the time of the pool's own next event (zero: none).
func (w *World) schedule(p *Pool, at time.Time) {
	p.at = at
	switch {
	case p.qi >= 0 && at.IsZero():
		heap.Remove(&w.queue, p.qi)
	case p.qi >= 0:
		heap.Fix(&w.queue, p.qi)
	case !at.IsZero():
		heap.Push(&w.queue, p)
	}
}

// due are the pools a step runs now: the watched, and those whose own
// event has come (taken off the queue until the step schedules them
// again, settle), in the world's order of pools.
func (w *World) due(into []*Pool) []*Pool {
	into = into[:0]
	for len(w.queue) > 0 && !w.queue[0].at.After(w.Now) {
		p := heap.Pop(&w.queue).(*Pool)
		p.stepped = true
		into = append(into, p)
	}
	into = w.join(into)
	if len(into) > 1 { // the queue gives them by time, join only what it added
		slices.SortFunc(into, (*Pool).order)
	}
	return into
}

// join adds the pools touched since to a step's (a fleet rollout's
// trigger, in a round), in the world's order of pools.
func (w *World) join(stepping []*Pool) []*Pool {
	n := len(stepping)
	for _, p := range w.touched {
		if p.watch && !p.stepped {
			p.stepped = true
			stepping = append(stepping, p)
		}
	}
	w.touched = w.touched[:0]
	if len(stepping) > n {
		slices.SortFunc(stepping, (*Pool).order)
	}
	return stepping
}

// settle schedules the pools of the step just run by their own next
// event; those still watched step again next (touched).
func (w *World) settle() {
	w.stepping = w.join(w.stepping)
	for _, p := range w.stepping {
		p.stepped = false
		w.schedule(p, p.nextAt())
		if p.watch {
			w.touched = append(w.touched, p)
		}
	}
}

// order is the world's order of pools: by namespace, then name.
func (p *Pool) order(o *Pool) int {
	return cmp.Or(cmp.Compare(p.Obj.Namespace, o.Obj.Namespace), cmp.Compare(p.Obj.Name, o.Obj.Name))
}

// nextAt is the time of the pool's own next event after now: its
// requeue, a node registering or turning unhealthy, an agent finishing, a
// MachineHealthCheck timeout (zero: none).
func (p *Pool) nextAt() time.Time {
	now := p.w.Now
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !p.ClusterPaused {
		consider(p.due)
	}
	for _, m := range p.Machines {
		consider(m.NodeAt)
		consider(m.UnhealthyAt)
		if m.Phase != "" {
			consider(m.AgentAt)
		}
	}
	if _, t := p.remediate(true); !t.IsZero() && !p.ClusterPaused {
		consider(t)
	}
	return next
}

// poolQueue is the world's pools by the time of their own next event.
type poolQueue []*Pool

func (q poolQueue) Len() int           { return len(q) }
func (q poolQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q poolQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].qi, q[j].qi = i, j
}
func (q *poolQueue) Push(x any) {
	p := x.(*Pool)
	p.qi = len(*q)
	*q = append(*q, p)
}
func (q *poolQueue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	p.qi = -1
	*q = old[:len(old)-1]
	return p
}
