package rollout

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestSeedingBothAnnotationsOfAPoolIsOneEvent(t *testing.T) {
	running := &UserData{Name: "p-userdata-1", RolloutWithoutVersion: "r1", PayloadHash: "h1"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		reason      string
		says        []string
	}{
		{"a pool that ran a rollout lost both: both seeded", nil, nodepoolv1.EventSeeded,
			[]string{nodepoolv1.AnnotationCurrentRolloutConfig + " seeded r1", nodepoolv1.AnnotationCurrentPayload + " seeded h1"}},
		{"one wrong, one missing", map[string]string{nodepoolv1.AnnotationCurrentRolloutConfig: "r0"}, nodepoolv1.EventCorrected,
			[]string{nodepoolv1.AnnotationCurrentRolloutConfig + " corrected from r0 to r1", nodepoolv1.AnnotationCurrentPayload + " seeded h1"}},
		{"only the payload missing", map[string]string{nodepoolv1.AnnotationCurrentRolloutConfig: "r1"}, nodepoolv1.EventSeeded,
			[]string{nodepoolv1.AnnotationCurrentPayload + " seeded h1"}},
	} {
		in := Input{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: tc.annotations},
			Status: nodepoolv1.NodePoolStatus{Version: "v1.36.0"}}}
		p := &Plan{Annotations: map[string]string{}}
		seedAnnotations(in, running, p)
		if len(p.Events) != 1 {
			t.Fatalf("%s: %d events, want one: %+v", tc.name, len(p.Events), p.Events)
		}
		if e := p.Events[0]; e.Reason != tc.reason {
			t.Errorf("%s: reason %s, want %s", tc.name, e.Reason, tc.reason)
		}
		for _, s := range tc.says {
			if !strings.Contains(p.Events[0].Message, s) {
				t.Errorf("%s: the event %q does not say %q", tc.name, p.Events[0].Message, s)
			}
		}
		if p.Annotations[nodepoolv1.AnnotationCurrentPayload] != "h1" {
			t.Errorf("%s: annotations %v, want the payload's seeded", tc.name, p.Annotations)
		}
	}
	in := Input{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
		nodepoolv1.AnnotationCurrentRolloutConfig: "r1", nodepoolv1.AnnotationCurrentPayload: "h1"}}}}
	p := &Plan{Annotations: map[string]string{}}
	seedAnnotations(in, running, p)
	if len(p.Events) != 0 {
		t.Errorf("annotations already right: events %+v, want none", p.Events)
	}
}

// A new pool's first rollout records what its machines run: nothing was
// lost, so nothing is said (an event per new pool would be a write per
// pool that no person acts on).
func TestANewPoolsAnnotationsAreRecordedWithoutAnEvent(t *testing.T) {
	running := &UserData{Name: "p-userdata-1", RolloutWithoutVersion: "r1", PayloadHash: "h1"}
	in := Input{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}}
	p := &Plan{Annotations: map[string]string{}}
	seedAnnotations(in, running, p)
	if len(p.Events) != 0 {
		t.Errorf("events %+v, want none for a new pool", p.Events)
	}
	if p.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig] != "r1" || p.Annotations[nodepoolv1.AnnotationCurrentPayload] != "h1" {
		t.Errorf("annotations %v, want both recorded", p.Annotations)
	}
}
