package sim

import (
	"fmt"
	"strconv"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// knobs is how one machine is told to behave, for tests and demos. Each is a
// spec field of SimMachine (so also of a SimMachineTemplate) and an
// annotation on the SimMachine or its Machine, which wins over the spec:
//
//	spec.bootDelay    sim.nodepool.dev/boot-delay: "10s"      power-on time before the payload fetch
//	spec.failBoot     sim.nodepool.dev/fail-boot: "true"      never boots (Booted=False, BootFailed)
//	spec.unhealthy    sim.nodepool.dev/unhealthy: "true"      the Node turns NotReady; "false" heals it
//	spec.updateDelay  sim.nodepool.dev/update-delay: "5s"     time an in-place update takes, from Working
//	spec.failUpdate   sim.nodepool.dev/fail-update: "<why>"   in-place updates stay Degraded with that
//	                                                          message; "false" or removing it retries
//	spec.workloads    sim.nodepool.dev/workloads: "guarded,bare,slow=90s"
//	                                                          pods on the Node for drains to evict (workload_pods.go)
//
// The provider-wide default boot delay is Options.BootDelay (--boot-delay),
// and the default update delay Options.UpdateDelay (--update-delay).
type knobs struct {
	bootDelay   time.Duration
	failBoot    bool
	unhealthy   bool
	updateDelay time.Duration
	// failUpdate is the message of a machine told to fail its in-place
	// updates, "" when it is not.
	failUpdate string
	// workloads are the pods the Node runs (spec.workloads), parsed.
	workloads []workload
}

// defaultFailUpdate is the message of a fail-update annotation left empty.
const defaultFailUpdate = "told to fail"

// machineKnobs resolves a machine's knobs: an annotation on the SimMachine
// wins over one on its Machine, which wins over the SimMachine's spec, which
// wins over the provider's defaults (the delays of defaults). Annotations
// that do not parse are ignored and returned as problems, so the caller can
// say so.
func machineKnobs(sm *simv1.SimMachine, m *clusterv1.Machine, defaults knobs) (knobs, []error) {
	k := knobs{bootDelay: defaults.bootDelay, updateDelay: defaults.updateDelay,
		failBoot: sm.Spec.FailBoot, unhealthy: sm.Spec.Unhealthy, failUpdate: sm.Spec.FailUpdate}
	if sm.Spec.BootDelay != nil {
		k.bootDelay = sm.Spec.BootDelay.Duration
	}
	if sm.Spec.UpdateDelay != nil {
		k.updateDelay = sm.Spec.UpdateDelay.Duration
	}
	var problems []error
	annotation := func(key string) (string, string, bool) {
		if v, ok := sm.Annotations[key]; ok {
			return v, "SimMachine", true
		}
		if m != nil {
			if v, ok := m.Annotations[key]; ok {
				return v, "Machine", true
			}
		}
		return "", "", false
	}
	boolKnob := func(key string, into *bool) {
		v, on, ok := annotation(key)
		if !ok {
			return
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			problems = append(problems, fmt.Errorf("annotation %s=%q on the %s is not true or false; ignored", key, v, on))
			return
		}
		*into = b
	}
	boolKnob(simv1.AnnotationFailBoot, &k.failBoot)
	boolKnob(simv1.AnnotationUnhealthy, &k.unhealthy)
	durationKnob := func(key string, into *time.Duration) {
		v, on, ok := annotation(key)
		if !ok {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			problems = append(problems, fmt.Errorf("annotation %s=%q on the %s is not a duration such as 10s; ignored", key, v, on))
			return
		}
		*into = d
	}
	durationKnob(simv1.AnnotationBootDelay, &k.bootDelay)
	durationKnob(simv1.AnnotationUpdateDelay, &k.updateDelay)
	spec, on := sm.Spec.Workloads, "SimMachine's spec.workloads"
	if v, from, ok := annotation(simv1.AnnotationWorkloads); ok {
		spec, on = v, "annotation "+simv1.AnnotationWorkloads+" on the "+from
	}
	if w, err := parseWorkloads(spec); err != nil {
		problems = append(problems, fmt.Errorf("%s: %w; ignored", on, err))
	} else {
		k.workloads = w
	}
	if v, _, ok := annotation(simv1.AnnotationFailUpdate); ok {
		switch v {
		case "false":
			k.failUpdate = ""
		case "":
			k.failUpdate = defaultFailUpdate
		default:
			k.failUpdate = v
		}
	}
	return k, problems
}
