package scenario

import (
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
	return w.join(into)
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
		slices.SortFunc(stepping, func(a, b *Pool) int { return a.order(b) })
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
	switch {
	case p.Obj.Namespace != o.Obj.Namespace:
		if p.Obj.Namespace < o.Obj.Namespace {
			return -1
		}
		return 1
	case p.Obj.Name < o.Obj.Name:
		return -1
	case p.Obj.Name > o.Obj.Name:
		return 1
	}
	return 0
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
