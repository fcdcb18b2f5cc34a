package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

func TestMachineKnobs(t *testing.T) {
	spec := func(s simv1.SimMachineSpec, annotations map[string]string) *simv1.SimMachine {
		return &simv1.SimMachine{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: s}
	}
	machine := func(annotations map[string]string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	}
	tests := []struct {
		name        string
		sm          *simv1.SimMachine
		m           *clusterv1.Machine
		want        knobs
		wantProblem string
	}{
		{name: "defaults", sm: spec(simv1.SimMachineSpec{}, nil), m: machine(nil), want: knobs{bootDelay: time.Second, updateDelay: time.Minute}},
		{name: "spec", sm: spec(simv1.SimMachineSpec{BootDelay: &metav1.Duration{Duration: 0}, FailBoot: true, Unhealthy: true}, nil), m: machine(nil),
			want: knobs{bootDelay: 0, failBoot: true, unhealthy: true, updateDelay: time.Minute}},
		{name: "Machine annotations win over the spec", sm: spec(simv1.SimMachineSpec{Unhealthy: true}, nil),
			m:    machine(map[string]string{simv1.AnnotationUnhealthy: "false", simv1.AnnotationFailBoot: "true", simv1.AnnotationBootDelay: "2m"}),
			want: knobs{bootDelay: 2 * time.Minute, failBoot: true, updateDelay: time.Minute}},
		{name: "SimMachine annotations win over the Machine's", sm: spec(simv1.SimMachineSpec{}, map[string]string{simv1.AnnotationUnhealthy: "true"}),
			m: machine(map[string]string{simv1.AnnotationUnhealthy: "false"}), want: knobs{bootDelay: time.Second, unhealthy: true, updateDelay: time.Minute}},
		{name: "no Machine yet", sm: spec(simv1.SimMachineSpec{FailBoot: true}, nil), want: knobs{bootDelay: time.Second, failBoot: true, updateDelay: time.Minute}},
		{name: "bad bool is ignored", sm: spec(simv1.SimMachineSpec{Unhealthy: true}, map[string]string{simv1.AnnotationUnhealthy: "yes please"}), m: machine(nil),
			want: knobs{bootDelay: time.Second, unhealthy: true, updateDelay: time.Minute}, wantProblem: `annotation sim.nodepool.dev/unhealthy="yes please" on the SimMachine is not true or false`},
		{name: "update knobs in the spec", sm: spec(simv1.SimMachineSpec{UpdateDelay: &metav1.Duration{Duration: 5 * time.Second}, FailUpdate: "disk full"}, nil), m: machine(nil),
			want: knobs{bootDelay: time.Second, updateDelay: 5 * time.Second, failUpdate: "disk full"}},
		{name: "update knobs in annotations win over the spec",
			sm:   spec(simv1.SimMachineSpec{UpdateDelay: &metav1.Duration{Duration: 5 * time.Second}, FailUpdate: "disk full"}, map[string]string{simv1.AnnotationFailUpdate: "false"}),
			m:    machine(map[string]string{simv1.AnnotationUpdateDelay: "1s", simv1.AnnotationFailUpdate: "ignored: the SimMachine's wins"}),
			want: knobs{bootDelay: time.Second, updateDelay: time.Second}},
		{name: "fail-update on the Machine", sm: spec(simv1.SimMachineSpec{}, nil), m: machine(map[string]string{simv1.AnnotationFailUpdate: "kernel panic"}),
			want: knobs{bootDelay: time.Second, updateDelay: time.Minute, failUpdate: "kernel panic"}},
		{name: "empty fail-update fails with a default message", sm: spec(simv1.SimMachineSpec{}, map[string]string{simv1.AnnotationFailUpdate: ""}), m: machine(nil),
			want: knobs{bootDelay: time.Second, updateDelay: time.Minute, failUpdate: defaultFailUpdate}},
		{name: "bad update delay is ignored", sm: spec(simv1.SimMachineSpec{}, map[string]string{simv1.AnnotationUpdateDelay: "soon"}), m: machine(nil),
			want: knobs{bootDelay: time.Second, updateDelay: time.Minute}, wantProblem: `annotation sim.nodepool.dev/update-delay="soon" on the SimMachine is not a duration`},
		{name: "workloads from the spec, the annotation wins", sm: spec(simv1.SimMachineSpec{Workloads: "bare"}, map[string]string{simv1.AnnotationWorkloads: "guarded, slow=90s"}), m: machine(nil),
			want: knobs{bootDelay: time.Second, updateDelay: time.Minute, workloads: []workload{{kind: workloadGuarded}, {kind: workloadSlow, grace: 90 * time.Second}}}},
		{name: "bad workloads are ignored", sm: spec(simv1.SimMachineSpec{Workloads: "guarded,slow"}, nil), m: machine(nil),
			want: knobs{bootDelay: time.Second, updateDelay: time.Minute}, wantProblem: `SimMachine's spec.workloads: workload "slow": slow needs a grace period`},
		{name: "bad duration is ignored", sm: spec(simv1.SimMachineSpec{}, nil), m: machine(map[string]string{simv1.AnnotationBootDelay: "-5s"}),
			want: knobs{bootDelay: time.Second, updateDelay: time.Minute}, wantProblem: "on the Machine is not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := machineKnobs(tt.sm, tt.m, knobs{bootDelay: time.Second, updateDelay: time.Minute})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("knobs = %+v, want %+v", got, tt.want)
			}
			if tt.wantProblem == "" && len(problems) > 0 || tt.wantProblem != "" && (len(problems) != 1 || !strings.Contains(problems[0].Error(), tt.wantProblem)) {
				t.Errorf("problems = %v, want one containing %q", problems, tt.wantProblem)
			}
		})
	}
}
