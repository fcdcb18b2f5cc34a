package integration

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/stack"
)

// fastClock runs factor times faster than real time from start.
type fastClock struct {
	start  time.Time
	factor float64
}

func (c fastClock) now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.factor))
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestTokensRotateForDaysAndScaleUpAlwaysBoots runs the controller on a
// clock where a real second is 30 simulated minutes, tokens valid 11 hours
// (rotated every 5.5), and boots a new machine every simulated couple of
// hours, and once in the middle of a rollout.
// `make test` simulates 12 hours; NODEPOOL_SIM_HOURS=48 the full two days.
func TestTokensRotateForDaysAndScaleUpAlwaysBoots(t *testing.T) {
	hours := envInt("NODEPOOL_SIM_HOURS", 12)
	clock := fastClock{start: time.Now(), factor: 1800}
	s := settings
	s.TokenTTL = 11 * time.Hour
	s.ResyncPeriod = time.Second
	s.Clock = clock.now
	st.MustRestartController(t, s)
	defer st.MustRestartController(t, settings)

	p := st.NewPool(t, "workers", 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	end := clock.now().Add(time.Duration(hours) * time.Hour)
	rotations := map[string]bool{}
	boots, rolled := 0, false
	for clock.now().Before(end) {
		before := st.Observe(t, p)
		if !rolled && clock.now().After(end.Add(-time.Duration(hours)*time.Hour/2)) {
			// Halfway: an owner change, and a scale-up during its rollout.
			rolled = true
			stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("midway.corp.example") })
			st.WaitForPool(t, p, 30*time.Second, "the rollout under way", func(s stack.PoolState) bool { return s.Pool.Status.Updating != "" })
			scale(t, p, 2)
			st.WaitForPool(t, p, stack.RolloutTimeout, "the rollout done with a scale-up in it", func(s stack.PoolState) bool {
				return stack.PoolSettled(2)(s) && s.Machines.Intersection(before.Machines).Len() == 0
			})
		} else {
			scale(t, p, 2)
			st.WaitForPool(t, p, stack.RolloutTimeout, "a scale-up booted at simulated "+clock.now().Sub(clock.start).Round(time.Minute).String(), stack.PoolSettled(2))
		}
		boots++
		scale(t, p, 1)
		st.WaitForPool(t, p, stack.RolloutTimeout, "scaled down", stack.PoolSettled(1))
		for _, tok := range tokensOf(t, p) {
			rotations[tok.Current] = true
		}
		time.Sleep(2 * time.Second) // an hour of simulated time
	}
	// A token is generated at creation and at every rotation.
	if want := hours * 10 / 55; len(rotations) < want {
		t.Errorf("saw %d distinct tokens over %d simulated hours, want at least %d (a rotation every 5.5 hours)", len(rotations), hours, want)
	}
	t.Logf("%d simulated hours: %d scale-ups booted, %d distinct tokens seen", hours, boots, len(rotations))
}

func tokensOf(t *testing.T, p *nodepoolv1.NodePool) []secrets.Token {
	t.Helper()
	list := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(p.Namespace),
		client.MatchingLabels{secrets.LabelPool: p.Name, secrets.LabelKind: secrets.KindToken}); err != nil {
		t.Fatal(err)
	}
	var out []secrets.Token
	for i := range list.Items {
		if tok, err := secrets.DecodeToken(&list.Items[i]); err == nil {
			out = append(out, tok)
		}
	}
	return out
}

var _ = payload.Short
