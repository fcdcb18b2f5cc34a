package install

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
)

// TestAPlatformBumpIsOneEventNotOnePerPool runs the shipped Deployments
// and three pools, and bumps the API-server proxy image in the management
// config: every pool reports the drift in its condition, and the bump is
// one ManagementConfigChanged event on the management config, with no
// ManagementConfigDrift event on any pool.
func TestAPlatformBumpIsOneEventNotOnePerPool(t *testing.T) {
	ctx := context.Background()
	startDeployment(t, controllerName)
	startDeployment(t, payloadName)
	var pools []*nodepoolv1.NodePool
	for range 3 {
		pools = append(pools, newPool(t, 1, 0))
	}
	for _, p := range pools {
		waitFor(t, p, "1 ready node", settled(1))
	}
	key := client.ObjectKey{Namespace: inputs.DefaultManagementConfig.Namespace, Name: inputs.DefaultManagementConfig.Name}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	original := cm.Data[inputs.ManagementConfigKey]
	t.Cleanup(func() {
		cur := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, key, cur); err == nil {
			cur.Data[inputs.ManagementConfigKey] = original
			_ = env.Client.Update(ctx, cur)
		}
	})
	// The controller's reference is the version it read at start: let it
	// read this one before the bump.
	time.Sleep(2 * time.Second)
	bumped := strings.Replace(original, "sha256:a", "sha256:b", 1)
	if bumped == original {
		t.Fatalf("the management config %q has no digest to bump", original)
	}
	cm.Data[inputs.ManagementConfigKey] = bumped
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		waitFor(t, p, "the bump pending", func(s state) bool {
			return meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionConfigUpdatePending)
		})
	}
	changed := stackWait(t, "one ManagementConfigChanged event on the management config", func() string {
		evs := events(t, key.Namespace, nodepoolv1.EventManagementConfigChanged, key.Name)
		if len(evs) == 0 {
			return ""
		}
		return fmt.Sprintf("%d: %s", len(evs), evs[0].Note)
	})
	if !strings.HasPrefix(changed, "1: apiServerProxyImage changed") {
		t.Errorf("ManagementConfigChanged events: %s, want one naming apiServerProxyImage", changed)
	}
	// The pools' statuses are written: any drift event would be too.
	time.Sleep(2 * time.Second)
	for _, p := range pools {
		if evs := events(t, p.Namespace, nodepoolv1.EventManagementConfigDrift, ""); len(evs) != 0 {
			t.Errorf("pool %s/%s has %d ManagementConfigDrift events for a platform bump", p.Namespace, p.Name, len(evs))
		}
	}
}

// event is what the test reads of an event.
type event struct{ Note string }

// events lists the events of reason in namespace, about the object named
// regarding (any when "").
func events(t *testing.T, namespace, reason, regarding string) []event {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(namespace), client.MatchingFields{"reason": reason}); err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, e := range list.Items {
		if regarding == "" || e.InvolvedObject.Name == regarding {
			out = append(out, event{Note: e.Message})
		}
	}
	return out
}
