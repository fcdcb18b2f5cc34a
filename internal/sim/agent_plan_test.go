package sim

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

func TestPlanUpdate(t *testing.T) {
	const (
		working  = nodepoolv1.UpdateStateWorking
		done     = nodepoolv1.UpdateStateDone
		degraded = nodepoolv1.UpdateStateDegraded
	)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	knob := failUpdateMessage("disk full")
	tests := []struct {
		name    string
		u       nodeUpdate
		k       knobs
		retryAt time.Time
		want    agentPlan
	}{
		{name: "no update asked", u: nodeUpdate{current: a, state: done}, want: agentPlan{action: agentIdle}},
		{name: "no update asked any more: forgets the one it was working on", u: nodeUpdate{current: a, state: working, started: ago(time.Second)},
			want: agentPlan{action: agentForget}},
		{name: "no update asked, even told to fail", u: nodeUpdate{}, k: knobs{failUpdate: "disk full"}, want: agentPlan{action: agentIdle}},
		{name: "done", u: nodeUpdate{desired: b, current: b, state: done}, want: agentPlan{action: agentIdle}},
		{name: "done stays done when told to fail afterwards", u: nodeUpdate{desired: b, current: b, state: done}, k: knobs{failUpdate: "disk full"},
			want: agentPlan{action: agentIdle}},
		{name: "a first update starts", u: nodeUpdate{desired: b}, want: agentPlan{action: agentStart}},
		{name: "a new desired payload after the last update starts", u: nodeUpdate{desired: b, current: a, state: done}, want: agentPlan{action: agentStart}},
		{name: "current is desired but not done: starts", u: nodeUpdate{desired: b, current: b, state: working}, want: agentPlan{action: agentStart}},
		{name: "working without a start of ours starts", u: nodeUpdate{desired: b, state: working}, want: agentPlan{action: agentStart}},
		{name: "an unknown state starts", u: nodeUpdate{desired: b, state: "Sleeping", started: ago(time.Hour)}, want: agentPlan{action: agentStart}},
		{name: "told to fail", u: nodeUpdate{desired: b, current: a, state: done}, k: knobs{failUpdate: "disk full"},
			want: agentPlan{action: agentFail, message: knob}},
		{name: "told to fail while working", u: nodeUpdate{desired: b, state: working, started: ago(time.Second)}, k: knobs{failUpdate: "disk full"},
			want: agentPlan{action: agentFail, message: knob}},
		{name: "told to fail while degraded for another cause", u: nodeUpdate{desired: b, state: degraded, message: "no Secret", started: ago(time.Second)},
			k: knobs{failUpdate: "disk full"}, want: agentPlan{action: agentFail, message: knob}},
		{name: "told to fail, already says so", u: nodeUpdate{desired: b, state: degraded, message: knob}, k: knobs{failUpdate: "disk full"},
			want: agentPlan{action: agentIdle}},
		{name: "told to fail with another message", u: nodeUpdate{desired: b, state: degraded, message: knob}, k: knobs{failUpdate: "kernel panic"},
			want: agentPlan{action: agentFail, message: failUpdateMessage("kernel panic")}},
		{name: "no longer told to fail: starts over", u: nodeUpdate{desired: b, state: degraded, message: knob}, want: agentPlan{action: agentStart}},
		{name: "working, within the update delay", u: nodeUpdate{desired: b, state: working, started: ago(2 * time.Second)}, k: knobs{updateDelay: 5 * time.Second},
			want: agentPlan{action: agentWait, after: 3 * time.Second}},
		{name: "working, update delay over", u: nodeUpdate{desired: b, state: working, started: ago(5 * time.Second)}, k: knobs{updateDelay: 5 * time.Second},
			want: agentPlan{action: agentApply}},
		{name: "working, no update delay", u: nodeUpdate{desired: b, state: working, started: now}, want: agentPlan{action: agentApply}},
		{name: "working, a failed attempt waits for its retry", u: nodeUpdate{desired: b, state: working, message: "503", started: ago(time.Minute)},
			retryAt: now.Add(time.Second), want: agentPlan{action: agentWait, after: time.Second}},
		{name: "working, retry due", u: nodeUpdate{desired: b, state: working, message: "503", started: ago(time.Minute)},
			retryAt: ago(time.Millisecond), want: agentPlan{action: agentApply}},
		{name: "degraded by a cause of its own is retried as it is", u: nodeUpdate{desired: b, state: degraded, message: "no Secret", started: ago(time.Minute)},
			k: knobs{updateDelay: time.Hour}, want: agentPlan{action: agentApply}},
		{name: "degraded, waits for its retry", u: nodeUpdate{desired: b, state: degraded, message: "no Secret", started: ago(time.Minute)},
			retryAt: now.Add(2 * time.Second), want: agentPlan{action: agentWait, after: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planUpdate(tt.u, tt.k, tt.retryAt, now); got != tt.want {
				t.Errorf("planUpdate = %+v (%s), want %+v (%s)", got, got.action, tt.want, tt.want.action)
			}
		})
	}
}

func TestReadNodeUpdate(t *testing.T) {
	started := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		nodepoolv1.AnnotationDesiredPayload:     "b",
		nodepoolv1.AnnotationNodeCurrentPayload: "a",
		nodepoolv1.AnnotationUpdateState:        nodepoolv1.UpdateStateDegraded,
		nodepoolv1.AnnotationUpdateMessage:      "why",
		simv1.AnnotationUpdateStarted:           started.Format(time.RFC3339Nano),
	}}}
	want := nodeUpdate{desired: "b", current: "a", state: nodepoolv1.UpdateStateDegraded, message: "why", started: started}
	if got := readNodeUpdate(node); got != want {
		t.Errorf("readNodeUpdate = %+v, want %+v", got, want)
	}
	node.Annotations[simv1.AnnotationUpdateStarted] = "yesterday"
	if got := readNodeUpdate(node); !got.started.IsZero() {
		t.Errorf("a start that does not parse reads as %s, want none", got.started)
	}
}

func TestAppliedLabels(t *testing.T) {
	tests := []struct {
		name             string
		node, oldP, newP map[string]string
		want             map[string]string
	}{
		{name: "swaps the payload's labels, keeps the others",
			node: map[string]string{"kubernetes.io/hostname": "m1", nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "aaaa", "old-only": "x", "team": "blue"},
			oldP: map[string]string{nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "aaaa", "old-only": "x"},
			newP: map[string]string{nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "bbbb", "new-only": "y"},
			want: map[string]string{"kubernetes.io/hostname": "m1", nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "bbbb", "new-only": "y", "team": "blue"}},
		{name: "no labels of the old payload recorded",
			node: map[string]string{"team": "blue"}, newP: map[string]string{nodepoolv1.LabelPayload: "bbbb"},
			want: map[string]string{"team": "blue", nodepoolv1.LabelPayload: "bbbb"}},
		{name: "a Node without labels", oldP: map[string]string{"a": "1"}, newP: map[string]string{"b": "2"}, want: map[string]string{"b": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := maps.Clone(tt.node)
			if got := appliedLabels(tt.node, tt.oldP, tt.newP); !maps.Equal(got, tt.want) {
				t.Errorf("appliedLabels = %v, want %v", got, tt.want)
			}
			if !maps.Equal(tt.node, original) {
				t.Errorf("appliedLabels changed its input: %v", tt.node)
			}
		})
	}
}

func TestFetchOutcome(t *testing.T) {
	const secret = "kube-system/update-workers"
	tests := []struct {
		name      string
		err       error
		wantState string
		contains  []string
	}{
		{name: "unknown token", err: &HTTPError{URL: "https://ps/ignition", StatusCode: 511, Status: "511 Network Authentication Required"},
			wantState: nodepoolv1.UpdateStateWorking, contains: []string{secret, "https://ps/ignition", "511", "does not know the token", "retrying"}},
		{name: "server error", err: &HTTPError{URL: "https://ps/ignition", StatusCode: 503, Status: "503 Service Unavailable"},
			wantState: nodepoolv1.UpdateStateWorking, contains: []string{"503", "retrying"}},
		{name: "no answer", err: errors.New("dial tcp 127.0.0.1:1: connection refused"),
			wantState: nodepoolv1.UpdateStateWorking, contains: []string{secret, "no answer", "connection refused"}},
		{name: "refused for good", err: &HTTPError{URL: "https://ps/ignition", StatusCode: 403, Status: "403 Forbidden"},
			wantState: nodepoolv1.UpdateStateDegraded, contains: []string{secret, "https://ps/ignition", "403 Forbidden"}},
		{name: "too large", err: errPayloadTooLarge, wantState: nodepoolv1.UpdateStateDegraded, contains: []string{secret, "larger than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fetchOutcome(tt.err, secret)
			if got.state != tt.wantState || got.booted != nil {
				t.Errorf("fetchOutcome = %+v, want state %s", got, tt.wantState)
			}
			for _, s := range tt.contains {
				if !strings.Contains(got.message, s) {
					t.Errorf("message %q lacks %q", got.message, s)
				}
			}
		})
	}
}

func TestCheckPayload(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	booted := &payload.Booted{Hash: a}
	if got := checkPayload(booted, a, "ns/s"); got.booted != booted || got.state != "" {
		t.Errorf("the desired payload: %+v, want it applied", got)
	}
	got := checkPayload(booted, b, "ns/s")
	if got.booted != nil || got.state != nodepoolv1.UpdateStateWorking ||
		!strings.Contains(got.message, payload.Short(a)) || !strings.Contains(got.message, payload.Short(b)) || !strings.Contains(got.message, "ns/s") {
		t.Errorf("another payload: %+v, want Working naming both payloads and the Secret", got)
	}
}

func TestSetAnnotations(t *testing.T) {
	node := &corev1.Node{}
	if !setAnnotations(node, map[string]*string{"a": ptr.To("1"), "b": nil}) || !maps.Equal(node.Annotations, map[string]string{"a": "1"}) {
		t.Fatalf("annotations %v, want a=1", node.Annotations)
	}
	if setAnnotations(node, map[string]*string{"a": ptr.To("1"), "b": nil}) {
		t.Error("setting what is already set reports a change")
	}
	if !setAnnotations(node, map[string]*string{"a": nil}) || len(node.Annotations) != 0 {
		t.Errorf("annotations %v, want none", node.Annotations)
	}
}

func TestNodeToSimMachine(t *testing.T) {
	tests := []struct {
		providerID string
		want       []types.NamespacedName
	}{
		{providerID: "sim://ns1/m1", want: []types.NamespacedName{{Namespace: "ns1", Name: "m1"}}},
		{providerID: "aws:///us-east-1a/i-0123"},
		{providerID: ""},
		{providerID: "sim://ns1"},
		{providerID: "sim:///m1"},
	}
	for _, tt := range tests {
		node := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: tt.providerID}}
		got := nodeToSimMachine(context.Background(), node)
		if len(got) != len(tt.want) || len(got) == 1 && got[0].NamespacedName != tt.want[0] {
			t.Errorf("nodeToSimMachine(%q) = %v, want %v", tt.providerID, got, tt.want)
		}
	}
}
