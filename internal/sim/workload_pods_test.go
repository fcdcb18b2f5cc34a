package sim

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestWorkloadsParseAndRefuseWhatIsNotAllowed(t *testing.T) {
	got, err := parseWorkloads(" guarded,bare , slow=2m,local,daemon")
	if err != nil || len(got) != 5 || got[2] != (workload{kind: workloadSlow, grace: 2 * time.Minute}) {
		t.Fatalf("parseWorkloads = %+v, %v", got, err)
	}
	for in, want := range map[string]string{
		"slow":      "slow needs a grace period",
		"slow=0s":   "slow needs a grace period",
		"guarded=1": "takes no value",
		"pets":      `unknown workload "pets"`,
		"bare,bare": "listed twice",
		"slow=48h":  "between 1s and 24h0m0s",
	} {
		if _, err := parseWorkloads(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseWorkloads(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestABudgetAllowsWhatItsHealthyPodsSpare(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ready := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "a"}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	deleting := ready("d")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	other := ready("o")
	other.Labels = map[string]string{"app": "b"}
	pods := []corev1.Pod{ready("p1"), ready("p2"), ready("p3"), deleting, other}
	budget := func(spec policyv1.PodDisruptionBudgetSpec) *policyv1.PodDisruptionBudget {
		spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: spec}
	}
	tests := []struct {
		name                      string
		pdb                       *policyv1.PodDisruptionBudget
		expected, healthy, wanted int32
		allowed                   int32
	}{
		{"maxUnavailable 0 allows nothing", budget(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0))}), 4, 3, 4, 0},
		{"maxUnavailable 2 of 4 with one deleting allows one", budget(policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2))}), 4, 3, 2, 1},
		{"minAvailable 50% rounds up", budget(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))}), 4, 3, 2, 1},
		{"minAvailable 1", budget(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}), 4, 3, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := budgetStatus(tt.pdb, pods, now)
			if st.ExpectedPods != tt.expected || st.CurrentHealthy != tt.healthy || st.DesiredHealthy != tt.wanted || st.DisruptionsAllowed != tt.allowed || st.ObservedGeneration != 3 {
				t.Errorf("status = %+v", st)
			}
		})
	}
	t.Run("a pod an eviction let go counts as disrupted until it deletes or two minutes pass", func(t *testing.T) {
		pdb := budget(policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))})
		pdb.Status.DisruptedPods = map[string]metav1.Time{"p1": {Time: now.Add(-time.Minute)}, "p2": {Time: now.Add(-3 * time.Minute)}}
		st, requeue := budgetStatus(pdb, pods, now)
		if st.CurrentHealthy != 2 || st.DisruptionsAllowed != 1 || len(st.DisruptedPods) != 1 || requeue != time.Minute {
			t.Errorf("status = %+v, requeue %s", st, requeue)
		}
	})
}
