package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestAHealthGateIsAcceptedWithItsDefaults(t *testing.T) {
	ns := env.NewNamespace(t)
	p := minimal(ns, "gated")
	p.Spec.Management.Health = &v1.Health{Canary: ptr.To(intstr.FromString("10%")), CanarySoak: &metav1.Duration{Duration: 5 * time.Minute},
		Soak: &metav1.Duration{Duration: time.Minute}, ProgressDeadline: &metav1.Duration{Duration: 15 * time.Minute},
		UnhealthyConditions: []v1.NodeConditionMatch{{Type: "KernelDeadlock", Status: "True"}}, RequiredConditions: []string{"example.com/AppHealthy"}}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("valid health gate refused: %v", err)
	}
	got := &v1.NodePool{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Management.Health.FailurePolicy != v1.FailurePolicyHalt {
		t.Errorf("failurePolicy defaults to %q, want Halt", got.Spec.Management.Health.FailurePolicy)
	}
}

func TestABadHealthGateIsRefusedNamingTheField(t *testing.T) {
	ns := env.NewNamespace(t)
	for i, tc := range []struct {
		name string
		h    v1.Health
		want string
	}{
		{"canary 0", v1.Health{Canary: ptr.To(intstr.FromInt32(0))}, "spec.management.health.canary must be a number of at least 1 or a percentage from 1% to 100%"},
		{"canary 0%", v1.Health{Canary: ptr.To(intstr.FromString("0%"))}, "spec.management.health.canary must be a number of at least 1"},
		{"canary 150%", v1.Health{Canary: ptr.To(intstr.FromString("150%"))}, "spec.management.health.canary must be a number of at least 1"},
		{"canary a word", v1.Health{Canary: ptr.To(intstr.FromString("few"))}, "spec.management.health.canary must be a number of at least 1"},
		{"canarySoak negative", v1.Health{CanarySoak: &metav1.Duration{Duration: -time.Second}}, "spec.management.health.canarySoak must be a duration between 0s and 24h"},
		{"soak beyond a day", v1.Health{Soak: &metav1.Duration{Duration: 25 * time.Hour}}, "spec.management.health.soak must be a duration between 0s and 24h"},
		{"progressDeadline 0s", v1.Health{ProgressDeadline: &metav1.Duration{}}, "spec.management.health.progressDeadline must be a duration between 1s and 24h"},
		{"failurePolicy unknown", v1.Health{FailurePolicy: "Retry"}, `spec.management.health.failurePolicy: Unsupported value: "Retry"`},
		{"unhealthy condition status unknown", v1.Health{UnhealthyConditions: []v1.NodeConditionMatch{{Type: "KernelDeadlock", Status: "Maybe"}}},
			`spec.management.health.unhealthyConditions[0].status: Unsupported value: "Maybe"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := minimal(ns, fmt.Sprintf("bad-health-%d", i))
			p.Spec.Management.Health = &tc.h
			err := env.Client.Create(context.Background(), p)
			if err == nil {
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %s", err, tc.want)
			}
		})
	}
}
