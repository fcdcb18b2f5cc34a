package cli

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

func TestPlanNamesWhatWillBlockOrSlowADrain(t *testing.T) {
	owned := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, Name: "x", Controller: ptr.To(true)}}
	}
	pod := func(name, node string, mod func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Labels: map[string]string{"app": name}, OwnerReferences: owned("ReplicaSet")},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	budget := func(app string, allowed int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: app},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 2}}
	}
	pods := []corev1.Pod{
		pod("guarded", "n1", nil),
		pod("web", "n1", func(p *corev1.Pod) { p.Labels["app"] = "web" }),
		pod("web-2", "n2", func(p *corev1.Pod) { p.Labels["app"] = "web" }),
		pod("bare", "n1", func(p *corev1.Pod) { p.OwnerReferences = nil }),
		pod("slow", "n2", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7200) }),
		pod("scratch", "n2", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}),
		pod("agent", "n1", func(p *corev1.Pod) { p.OwnerReferences = owned("DaemonSet") }),
		pod("done", "n1", func(p *corev1.Pod) { p.OwnerReferences, p.Status.Phase = nil, corev1.PodSucceeded }),
		pod("fine", "n2", nil),
	}
	budgets := []policyv1.PodDisruptionBudget{budget("guarded", 0), budget("web", 1)}
	got, ignored := drainRisks(pods, budgets, 2, poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainHalt, Timeout: time.Hour})
	var lines []string
	for _, d := range got {
		lines = append(lines, d.Pod+" "+map[bool]string{true: "blocks", false: "slows"}[d.Blocks]+" "+d.Budget+": "+d.Why)
	}
	want := []string{
		"apps/bare slows : no controller owns it",
		"apps/guarded blocks guarded: PodDisruptionBudget guarded allows no disruption now",
		"apps/web slows web: PodDisruptionBudget web allows 1 disruptions, fewer than the 2 pods it covers on the 2 nodes drained at once",
		"apps/scratch slows : emptyDir volume tmp",
		"apps/slow blocks : termination grace period 2h0m0s is longer than the drain timeout 1h0m0s: the rollout halts",
		"apps/web-2 slows web:",
	}
	if len(lines) != len(want) || ignored != 1 {
		t.Fatalf("drainRisks = (ignored %d)\n%s\nwant\n%s", ignored, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], want[i])
		}
	}
	if got, _ := drainRisks([]corev1.Pod{pod("fine", "n1", nil)}, nil, 1, poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainWait, Timeout: 10 * time.Minute}); len(got) != 0 {
		t.Errorf("a pod with a controller, no budget, no volume and a short grace period: %+v, want nothing", got)
	}
}
