package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

func ownedBy(kind string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{Kind: kind, Name: "x", Controller: ptr.To(true)}}
}

// workloadPod is a running pod of a ReplicaSet labelled app=name, edited
// by mod.
func workloadPod(name, node string, mod func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Labels: map[string]string{"app": name}, OwnerReferences: ownedBy("ReplicaSet")},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if mod != nil {
		mod(&p)
	}
	return p
}

// budgetFor is a PodDisruptionBudget over app=app allowing allowed
// disruptions now.
func budgetFor(app string, allowed int32) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: app},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 2}}
}

func TestPredictDrainsNamesWhatWillBlockOrSlowADrain(t *testing.T) {
	wait := poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainWait, Timeout: 10 * time.Minute}
	halt := poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainHalt, Timeout: time.Hour}
	force := poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainForce, Timeout: time.Hour}
	app := func(a string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Labels["app"] = a } }
	grace := func(s int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(s) }
	}
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		budgets []policyv1.PodDisruptionBudget
		atOnce  int
		policy  poolmath.DrainPolicy
		want    []string // "<pod> blocks|slows <budget>: <why prefix>", in node/pod order
		ignored int
	}{
		{name: "a budget that allows no disruption blocks",
			pods: []corev1.Pod{workloadPod("guarded", "n1", nil)}, budgets: []policyv1.PodDisruptionBudget{budgetFor("guarded", 0)}, atOnce: 1, policy: wait,
			want: []string{"apps/guarded blocks guarded: PodDisruptionBudget guarded allows no disruption now (2 healthy, 2 needed)"}},
		{name: "a budget that allows fewer disruptions than the pods drained together slows each of them",
			pods:    []corev1.Pod{workloadPod("web", "n1", app("web")), workloadPod("web-2", "n2", app("web"))},
			budgets: []policyv1.PodDisruptionBudget{budgetFor("web", 1)}, atOnce: 2, policy: wait,
			want: []string{"apps/web slows web: PodDisruptionBudget web allows 1 disruptions, fewer than the 2 pods it covers on the 2 nodes drained at once",
				"apps/web-2 slows web: PodDisruptionBudget web allows 1"}},
		{name: "the same budget is enough when the nodes drain one at a time",
			pods:    []corev1.Pod{workloadPod("web", "n1", app("web")), workloadPod("web-2", "n2", app("web"))},
			budgets: []policyv1.PodDisruptionBudget{budgetFor("web", 1)}, atOnce: 1, policy: wait},
		{name: "a budget of another namespace covers nothing",
			pods: []corev1.Pod{workloadPod("guarded", "n1", func(p *corev1.Pod) { p.Namespace = "other" })}, budgets: []policyv1.PodDisruptionBudget{budgetFor("guarded", 0)}, atOnce: 1, policy: wait},
		{name: "a pod without a controller is lost",
			pods: []corev1.Pod{workloadPod("bare", "n1", func(p *corev1.Pod) { p.OwnerReferences = nil })}, atOnce: 1, policy: wait,
			want: []string{"apps/bare slows : no controller owns it: the drain deletes it and nothing recreates it"}},
		{name: "emptyDir and hostPath volumes lose their data",
			pods: []corev1.Pod{workloadPod("scratch", "n1", func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}}
			})}, atOnce: 1, policy: wait,
			want: []string{"apps/scratch slows : emptyDir volume tmp: its data is lost with the node", "apps/scratch slows : hostPath volume logs: its data stays on the old node"}},
		{name: "a grace period longer than the timeout blocks with Halt",
			pods: []corev1.Pod{workloadPod("slow", "n1", grace(7200))}, atOnce: 1, policy: halt,
			want: []string{"apps/slow blocks : termination grace period 2h0m0s is longer than the drain timeout 1h0m0s: the rollout halts (onTimeout Halt)"}},
		{name: "a grace period longer than the timeout is cut short with Force",
			pods: []corev1.Pod{workloadPod("slow", "n1", grace(7200))}, atOnce: 1, policy: force,
			want: []string{"apps/slow slows : termination grace period 2h0m0s is longer than the drain timeout 1h0m0s: the node goes before it stopped (onTimeout Force)"}},
		{name: "a grace period longer than the timeout is reported with Wait",
			pods: []corev1.Pod{workloadPod("slow", "n1", grace(3600))}, atOnce: 1, policy: wait,
			want: []string{"apps/slow slows : termination grace period 1h0m0s is longer than the drain timeout 10m0s: the drain is reported blocked while it stops"}},
		{name: "the default grace period of 30s is within any timeout",
			pods: []corev1.Pod{workloadPod("fine", "n1", nil)}, atOnce: 1, policy: poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainHalt, Timeout: time.Minute}},
		{name: "DaemonSet and static pods are ignored, finished pods are nothing",
			pods: []corev1.Pod{
				workloadPod("agent", "n1", func(p *corev1.Pod) { p.OwnerReferences = ownedBy("DaemonSet") }),
				workloadPod("static", "n1", func(p *corev1.Pod) {
					p.OwnerReferences, p.Annotations = nil, map[string]string{corev1.MirrorPodAnnotationKey: "x"}
				}),
				workloadPod("done", "n1", func(p *corev1.Pod) { p.OwnerReferences, p.Status.Phase = nil, corev1.PodSucceeded }),
			}, atOnce: 1, policy: wait, ignored: 2},
		{name: "risks are listed by node, then pod",
			pods: []corev1.Pod{workloadPod("b", "n2", func(p *corev1.Pod) { p.OwnerReferences = nil }),
				workloadPod("a", "n2", func(p *corev1.Pod) { p.OwnerReferences = nil }),
				workloadPod("z", "n1", func(p *corev1.Pod) { p.OwnerReferences = nil })}, atOnce: 1, policy: wait,
			want: []string{"apps/z slows : no controller", "apps/a slows : no controller", "apps/b slows : no controller"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := PredictDrains(tc.pods, tc.budgets, tc.atOnce, tc.policy)
			var lines []string
			for _, r := range f.Risks {
				lines = append(lines, r.Pod+" "+map[bool]string{true: "blocks", false: "slows"}[r.Blocks]+" "+r.Budget+": "+r.Why)
			}
			if len(lines) != len(tc.want) || f.Ignored != tc.ignored {
				t.Fatalf("PredictDrains = (ignored %d)\n%s\nwant (ignored %d)\n%s", f.Ignored, strings.Join(lines, "\n"), tc.ignored, strings.Join(tc.want, "\n"))
			}
			for i := range tc.want {
				if !strings.HasPrefix(lines[i], tc.want[i]) {
					t.Errorf("risk %d = %q, want it to start with %q", i, lines[i], tc.want[i])
				}
			}
			blocks := false
			for _, w := range tc.want {
				blocks = blocks || strings.Contains(w, " blocks ")
			}
			if f.Blocks() != blocks || (f.Stall() != "") != blocks {
				t.Errorf("Blocks %v, Stall %q; want a block %v", f.Blocks(), f.Stall(), blocks)
			}
		})
	}
}

func TestTheNodesDrainedTogetherFollowTheStrategy(t *testing.T) {
	for _, tc := range []struct {
		s    Strategy
		want int
	}{
		{Strategy{Name: "RollingUpdate", MaxSurge: 1, MaxUnavailable: 0}, 1},
		{Strategy{Name: "RollingUpdate", MaxSurge: 2, MaxUnavailable: 1}, 3},
		{Strategy{Name: "OnDelete"}, 1},
		{Strategy{Name: StrategyInPlace, MaxUnavailable: 2}, 2},
		{Strategy{Name: StrategyInPlace, MaxSurge: 5, MaxUnavailable: 0}, 1},
	} {
		if got := DrainsAtOnce(tc.s); got != tc.want {
			t.Errorf("DrainsAtOnce(%+v) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// A drain predicted to block changes what the MaintenanceWindow
// prediction says, by the drain policy: Wait stalls and Halt halts the
// rollout in the window, Force adds the drain timeout of each blocked node
// to its duration; a forecast that blocks nothing and the controller's
// decisions (no pods read) leave the prediction as it was.
func TestAPredictedDrainBlockSaysTheRolloutDoesNotFitItsWindow(t *testing.T) {
	guarded := &DrainPods{Pods: []corev1.Pod{workloadPod("guarded", "n1", nil)}, Budgets: []policyv1.PodDisruptionBudget{budgetFor("guarded", 0)}}
	bare := &DrainPods{Pods: []corev1.Pod{workloadPod("bare", "n1", func(p *corev1.Pod) { p.OwnerReferences = nil })}}
	const fits = "a rollout of 3 machine(s) in 3 round(s) takes about 30m0s (from 3 rollouts, 20m0s–50m0s): it fits the 1h0m0s of the window"
	for _, tc := range []struct {
		name   string
		drain  *nodepoolv1.Drain
		pods   *DrainPods
		want   []string
		blocks bool
	}{
		{name: "the controller reads no pods: the prediction is the rollouts' durations", want: []string{fits}},
		{name: "nothing blocks: the prediction is the rollouts' durations", pods: bare, want: []string{fits}},
		{name: "Wait: the rollout stalls in the window", pods: guarded, blocks: true,
			want: []string{fits + "; but the drain of 1 node(s) is predicted to block (n1, pod apps/guarded: PodDisruptionBudget guarded allows no disruption now",
				"the rollout is predicted to stall on it until the pods can go (onTimeout Wait waits for ever); it is predicted not to complete in the window: it stalls in it"}},
		{name: "Halt: the rollout halts in the window", pods: guarded, blocks: true,
			drain: &nodepoolv1.Drain{OnTimeout: nodepoolv1.DrainHalt, Timeout: &metav1.Duration{Duration: 20 * time.Minute}},
			want:  []string{"the rollout is predicted to halt once that drain has lasted 20m0s (onTimeout Halt)", "it is predicted not to complete in the window: it halts in it"}},
		{name: "Force within the window still fits", pods: guarded, blocks: true,
			drain: &nodepoolv1.Drain{OnTimeout: nodepoolv1.DrainForce, Timeout: &metav1.Duration{Duration: 20 * time.Minute}},
			want:  []string{"each such node drains for the timeout 20m0s before its pods are deleted (onTimeout Force), about 20m0s more; about 50m0s in all: it still fits the 1h0m0s of the window"}},
		{name: "Force past the window does not fit", pods: guarded, blocks: true,
			drain: &nodepoolv1.Drain{OnTimeout: nodepoolv1.DrainForce, Timeout: &metav1.Duration{Duration: 45 * time.Minute}},
			want:  []string{"about 45m0s more; about 1h15m0s in all: it is predicted not to fit the 1h0m0s of the window"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			w.Pool.Spec.Management.Maintenance = daily()
			in := settled(t, w)
			in.Pool.Spec.Management.Maintenance = daily()
			in = withDrift(t, in, w, t0.Add(-time.Hour))
			in.Pool.Spec.Management.Drain = tc.drain
			in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = t0.Add(-time.Minute).Format(time.RFC3339)
			in.RecentRollouts = pastOf3(20*time.Minute, 50*time.Minute, 30*time.Minute)
			in.DrainPods = tc.pods
			p := Decide(in)
			if p.Decision.Action != ActionDefer {
				t.Fatalf("decision %s, want Defer (the window holds the rollout)", p.Decision.Action)
			}
			f := p.Decision.Window.Fit
			for _, want := range tc.want {
				if !strings.Contains(f, want) {
					t.Errorf("fit %q\ndoes not say %q", f, want)
				}
			}
			if tc.pods == nil && p.Decision.DrainForecast != nil {
				t.Errorf("forecast %+v without pods read", p.Decision.DrainForecast)
			}
			if got := p.Decision.DrainForecast.Blocks(); got != tc.blocks {
				t.Errorf("forecast blocks %v, want %v", got, tc.blocks)
			}
			if c := cond(p, nodepoolv1.ConditionMaintenanceWindow); !strings.Contains(c.Message, f) {
				t.Errorf("MaintenanceWindow message %q does not say the fit", c.Message)
			}
		})
	}
}

// Only a decision that rolls the nodes predicts their drains.
func TestNoDrainIsPredictedWhenNothingRolls(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	in.DrainPods = &DrainPods{Pods: []corev1.Pod{workloadPod("guarded", "n1", nil)}, Budgets: []policyv1.PodDisruptionBudget{budgetFor("guarded", 0)}}
	if p := Decide(in); p.Decision.Action.Rolls() || p.Decision.DrainForecast != nil {
		t.Errorf("settled pool: action %s, forecast %+v; want no rollout and no forecast", p.Decision.Action, p.Decision.DrainForecast)
	}
	w.Pool.Spec.Release.Version = "v1.36.4"
	in = relatest(t, in, w)
	if p := Decide(in); p.Decision.Action != ActionStart || !p.Decision.DrainForecast.Blocks() {
		t.Errorf("version bump: action %s, forecast %+v; want a rollout whose drain blocks", p.Decision.Action, p.Decision.DrainForecast)
	}
}
