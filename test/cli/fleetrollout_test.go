package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
)

func fleetPools(t *testing.T, ns, label string, names ...string) []*nodepoolv1.NodePool {
	t.Helper()
	var pools []*nodepoolv1.NodePool
	for _, n := range names {
		pools = append(pools, newPool(t, ns, n, 1, func(p *nodepoolv1.NodePool) { p.Labels = map[string]string{"fleet": label} }))
	}
	for _, p := range pools {
		waitFor(t, p, rolloutTimeout, p.Name+" ready", settled(1))
	}
	return pools
}

func cleanupFleetRollout(t *testing.T, name string) {
	t.Cleanup(func() {
		_ = st.Env.Client.Delete(context.Background(), &nodepoolv1.FleetRollout{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

func TestFleetRolloutFromFlagsRollsInWavesAndStatusFollowsItToTheEnd(t *testing.T) {
	ns := newNamespace(t)
	pools := fleetPools(t, ns, "cli-waves", "a", "b", "c")
	setProxyImage(t, "c")
	for _, p := range pools {
		waitFor(t, p, 30*time.Second, p.Name+" drift", hasDrift("apiserver-proxy"))
	}
	cleanupFleetRollout(t, "cli-waves")
	out := ok(t, "", "fleet", "rollout", "cli-waves", "--selector", "fleet=cli-waves", "--waves", "1,100%", "--soak", "2s", "--max-concurrent", "2")
	if !strings.Contains(out, "fleetrollout cli-waves created: ApplyPending in waves 1,100%") {
		t.Fatalf("create: %s", out)
	}
	status := ok(t, "", "fleet", "rollout", "status", "cli-waves", "--timeout", "8m")
	if !strings.Contains(status, `fleetrollout "cli-waves" Complete, wave 2 of 2: 3 of 3 pools done`) ||
		!regexp.MustCompile(`(?m)^1\s+1\s+1\s+0\s+0\s+0\s+0\s+0\s`).MatchString(status) || !regexp.MustCompile(`(?m)^2\s+2\s+2\s`).MatchString(status) {
		t.Fatalf("status:\n%s", status)
	}
	if !strings.Contains(status, "Progressing") && !strings.Contains(status, "Soaking") {
		t.Errorf("status printed no progress before the end:\n%s", status)
	}
	rep := decodeJSON[cli.FleetRolloutReport](t, ok(t, "", "fleet", "rollout", "status", "cli-waves", "--watch=false", "-o", "json"))
	if rep.Phase != "Complete" || len(rep.Waves) != 2 || rep.Waves[1].Done != 2 {
		t.Fatalf("report %+v", rep)
	}
	// The fleet names each pool's fleet rollout; the history its initiator.
	fleet := ok(t, ns, "fleet")
	for _, want := range []string{`a .*cli-waves\(wave 1, done\)`, `b .*cli-waves\(wave 2, done\)`, `c .*cli-waves\(wave 2, done\)`} {
		if !regexp.MustCompile(want).MatchString(fleet) {
			t.Errorf("fleet lacks %q:\n%s", want, fleet)
		}
	}
	if h := ok(t, ns, "rollout", "history", "b"); !strings.Contains(h, "fleetrollout/cli-waves") {
		t.Errorf("history of b:\n%s", h)
	}
}

func TestFleetRolloutPauseResumeAndCancelWithTheirExitCodes(t *testing.T) {
	ns := newNamespace(t)
	fleetPools(t, ns, "cli-controls", "x", "y")
	cleanupFleetRollout(t, "cli-controls")
	ok(t, "", "fleet", "rollout", "cli-controls", "--selector", "fleet=cli-controls", "--waves", "1,100%", "--soak", "1h", "--action", "restart", "--paused")
	waitForPhase(t, "cli-controls", nodepoolv1.FleetPhasePaused, time.Minute)
	r := fails(t, "", cli.ExitStalled, "fleet", "rollout", "status", "cli-controls")
	if !strings.Contains(r.err, "is paused: run `kubectl nodepool fleet rollout resume cli-controls`") {
		t.Fatalf("paused status: %s", r.err)
	}
	if out := ok(t, "", "fleet", "rollout", "pause", "cli-controls"); !strings.Contains(out, "already paused") {
		t.Errorf("pause twice: %s", out)
	}
	ok(t, "", "fleet", "rollout", "resume", "cli-controls")
	// The first wave rolls (a restart), then the hour's soak: a timeout.
	waitForPhase(t, "cli-controls", nodepoolv1.FleetPhaseSoaking, 3*time.Minute)
	r = fails(t, "", cli.ExitTimeout, "fleet", "rollout", "status", "cli-controls", "--timeout", "2s")
	if !strings.Contains(r.out, "Soaking") {
		t.Fatalf("want the soak after wave 1:\n%s\n%s", r.out, r.err)
	}
	if out := ok(t, "", "fleet", "rollout", "cancel", "cli-controls"); !strings.Contains(out, "fleetrollout cli-controls cancelled") {
		t.Fatalf("cancel: %s", out)
	}
	r = fails(t, "", cli.ExitFailure, "fleet", "rollout", "status", "cli-controls", "--timeout", "1m")
	if !strings.Contains(r.err, "was cancelled") || !strings.Contains(r.out, "Cancelled") {
		t.Fatalf("cancelled status:\n%s\n%s", r.out, r.err)
	}
	if out := ok(t, "", "fleet", "rollout", "resume", "cli-controls"); !strings.Contains(out, "is cancelled: nothing to resume") {
		t.Errorf("resume after cancel: %s", out)
	}
}

func TestFleetRolloutRefusesBadFlagsAndTheAPIsRefusalsNameTheField(t *testing.T) {
	if r := fails(t, "", cli.ExitFailure, "fleet", "rollout", "bad", "--waves", "1,half"); !strings.Contains(r.err, "every wave is a count or a percentage") {
		t.Errorf("--waves 1,half: %s", r.err)
	}
	if r := fails(t, "", cli.ExitFailure, "fleet", "rollout", "bad", "--waves", "0,100%"); !strings.Contains(r.err, "spec.waves: every wave must be a count above 0") {
		t.Errorf("--waves 0: %s", r.err)
	}
	if r := fails(t, "", cli.ExitFailure, "fleet", "rollout", "bad", "--action", "upgrade"); !strings.Contains(r.err, "use apply-pending or restart") {
		t.Errorf("--action: %s", r.err)
	}
	if r := fails(t, "", cli.ExitFailure, "fleet", "rollout", "bad", "--selector", "a in"); !strings.Contains(r.err, "is not a label selector") {
		t.Errorf("--selector: %s", r.err)
	}
	if out := ok(t, "", "fleet", "rollout", "dry", "--waves", "1,25%,100%", "--dry-run"); !strings.Contains(out, "valid (dry run, not created)") {
		t.Errorf("--dry-run: %s", out)
	}
	if r := fails(t, "", cli.ExitUnreachable, "fleet", "rollout", "status", "dry", "--watch=false"); !strings.Contains(r.err, "not found") {
		t.Errorf("a dry run creates nothing: %s", r.err)
	}
}

func waitForPhase(t *testing.T, name string, phase nodepoolv1.FleetRolloutPhase, timeout time.Duration) {
	t.Helper()
	fr := &nodepoolv1.FleetRollout{}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := st.Env.Client.Get(context.Background(), client.ObjectKey{Name: name}, fr); err != nil {
			t.Fatal(err)
		}
		if fr.Status.Phase == phase {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("fleet rollout %s is %s (%s), not %s after %s", name, fr.Status.Phase, fr.Status.Message, phase, timeout)
}
