package rollout

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
)

// What the engine keeps about a rollout is on its record: read from it, an
// older nodepool's pool annotations moved onto it, a new record started
// clean but for a rollback that holds, and a pool without a record yet
// keeping it where it was.
func TestARolloutsStateIsKeptOnItsRecord(t *testing.T) {
	const halt = "r1/p1/m1"
	for _, tc := range []struct {
		name       string
		pool       map[string]string // the pool's annotations
		current    *CurrentRollout
		starts     bool   // the plan starts a new record
		rolledBack string // the pool's inputs render the rollout rolled back
		wantRead   string // recorded(halted)
		wantPool   map[string]string
		wantState  map[string]string
	}{
		{name: "read from the record", current: &CurrentRollout{Revision: 3, State: map[string]string{nodepoolv1.AnnotationHalted: halt}},
			wantRead: halt, wantPool: map[string]string{}, wantState: nil},
		{name: "an older nodepool's annotation is read and moved onto the record",
			pool: map[string]string{nodepoolv1.AnnotationHalted: halt}, current: &CurrentRollout{Revision: 3},
			wantRead: halt, wantPool: map[string]string{nodepoolv1.AnnotationHalted: ""}, wantState: map[string]string{nodepoolv1.AnnotationHalted: halt}},
		{name: "the record wins over an older annotation left on the pool",
			pool:     map[string]string{nodepoolv1.AnnotationHalted: "old/p/m"},
			current:  &CurrentRollout{Revision: 3, State: map[string]string{nodepoolv1.AnnotationHalted: halt}},
			wantRead: halt, wantPool: map[string]string{nodepoolv1.AnnotationHalted: ""}, wantState: nil},
		{name: "a new rollout's record starts clean",
			pool: map[string]string{nodepoolv1.AnnotationHalted: halt}, current: &CurrentRollout{Revision: 3}, starts: true,
			wantRead: halt, wantPool: map[string]string{nodepoolv1.AnnotationHalted: ""}, wantState: nil},
		{name: "a rollback that holds is carried onto the new record",
			current: &CurrentRollout{Revision: 3, State: map[string]string{nodepoolv1.AnnotationRolledBack: "bad"}}, starts: true, rolledBack: "bad",
			wantPool: map[string]string{}, wantState: map[string]string{nodepoolv1.AnnotationRolledBack: "bad"}},
		{name: "a pool with no record yet keeps it on its annotations",
			pool:     map[string]string{nodepoolv1.AnnotationHalted: halt},
			wantRead: halt, wantPool: map[string]string{}, wantState: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: tc.pool}}, Current: tc.current}
			if tc.rolledBack != "" {
				in.Latest, in.Hashes = &payload.Payload{}, payload.Hashes{Rollout: tc.rolledBack}
			}
			if got := recorded(in, nodepoolv1.AnnotationHalted); got != tc.wantRead {
				t.Errorf("read %q, want %q", got, tc.wantRead)
			}
			p := Plan{Annotations: map[string]string{}}
			if tc.starts {
				p.Record = &Record{Initiator: InitiatorSpec}
			}
			moveOlderRecords(in, &p)
			carryOn(in, &p)
			keepWithoutRecord(in, &p)
			if !maps.Equal(p.Annotations, tc.wantPool) {
				t.Errorf("pool annotations %v, want %v", p.Annotations, tc.wantPool)
			}
			if !maps.Equal(p.RecordState, tc.wantState) {
				t.Errorf("record state %v, want %v", p.RecordState, tc.wantState)
			}
		})
	}
}

// A resume request ends the halt of the rollout it names, and only that
// one; it is removed either way.
func TestAResumeRequestEndsTheHaltOfTheRolloutItNames(t *testing.T) {
	started := time.Date(2026, 10, 20, 16, 29, 42, 0, time.UTC)
	current := &CurrentRollout{Revision: 4, RolloutHash: "r", Started: started, InProgress: true, State: map[string]string{
		nodepoolv1.AnnotationHalted: "r/p/m1", nodepoolv1.AnnotationDrainHalted: "r/m2"}}
	for _, tc := range []struct {
		request string
		resumed bool
		reason  string
	}{
		{"4", true, nodepoolv1.EventRolloutResumed},
		{"3", false, nodepoolv1.EventResumeIgnored},
		{"now", false, nodepoolv1.EventResumeIgnored},
	} {
		in := Input{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{nodepoolv1.AnnotationResume: tc.request}}}, Current: current}
		p := Plan{Annotations: map[string]string{}}
		in = resumeRequested(in, &p)
		if v, ok := p.Annotations[nodepoolv1.AnnotationResume]; !ok || v != "" {
			t.Errorf("request %q: not removed (%v)", tc.request, p.Annotations)
		}
		halted, drain := recorded(in, nodepoolv1.AnnotationHalted), recorded(in, nodepoolv1.AnnotationDrainHalted)
		if resumed := halted == "" && drain == "r/m2"+drainResumed; resumed != tc.resumed {
			t.Errorf("request %q: halt %q, drain halt %q after it; want resumed %v", tc.request, halted, drain, tc.resumed)
		}
		if tc.resumed && (p.RecordState[nodepoolv1.AnnotationHalted] != "" || p.RecordState[nodepoolv1.AnnotationDrainHalted] != "r/m2"+drainResumed) {
			t.Errorf("request %q: record state %v, want the halt removed and the drain halt excused", tc.request, p.RecordState)
		}
		// The record stays the rollout it is: a configuration applied
		// again is on trial from its start after a resume too (seed 8910).
		if c := in.Current; c == nil || c.Revision != 4 || c.RolloutHash != "r" || !c.Started.Equal(started) || !c.InProgress {
			t.Errorf("request %q: the record read after it is %+v, want revision 4 of rollout r, in progress since %s", tc.request, c, started)
		}
		if len(p.Events) != 1 || p.Events[0].Reason != tc.reason {
			t.Errorf("request %q: events %+v, want one %s", tc.request, p.Events, tc.reason)
		}
	}
	if current.State[nodepoolv1.AnnotationHalted] == "" {
		t.Error("the input's record was changed in place")
	}
}

// Seed 3549: a resume carried out in the reconcile that starts a new
// rollout (the owner's undo, held by the pause the resume ended) excuses
// the halt of the rollout that ends; the new rollout's record starts
// without it.
func TestAResumeInTheReconcileANewRolloutStartsStaysOnTheOldRecord(t *testing.T) {
	in := Input{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{nodepoolv1.AnnotationResume: "3"}}},
		Current: &CurrentRollout{Revision: 3, State: map[string]string{nodepoolv1.AnnotationDrainHalted: "old/m1"}}}
	p := Plan{Annotations: map[string]string{}}
	in = resumeRequested(in, &p)
	p.Record = &Record{Initiator: InitiatorSpec, RolloutHash: "new"}
	moveOlderRecords(in, &p)
	carryOn(in, &p)
	keepWithoutRecord(in, &p)
	if v, ok := p.RecordState[nodepoolv1.AnnotationDrainHalted]; ok && v != "" {
		t.Errorf("the new rollout's record starts with the old rollout's drain halt %q", v)
	}
}
