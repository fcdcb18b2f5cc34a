package controller

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// For random pools and observed states, what `kubectl nodepool plan`
// predicts and what the controller then writes agree: a rollout is
// predicted exactly when the MachineDeployment the controller writes
// replaces machines, for the initiator it records, with as many machines
// as Cluster API replaces on that MachineDeployment, in as many steps as
// Cluster API's own maxSurge / maxUnavailable of it allow; and the count
// it writes is the spec's (spec.replicas, or the autoscaler's count within
// autoScaling's bounds), the rule written out in the test.
func TestPlanPredictsWhatTheControllerWrites(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]int{}
	for i := 0; i < 250; i++ {
		in, what := randomPool(t, rng, now)
		plan := rollout.Decide(in)
		pool := in.Pool
		pr := cli.Predict(in, plan, pool, pool)
		seen[pr.Rollout]++

		before := &clusterv1.MachineDeployment{}
		current := &rollout.MachineDeploymentTarget{DataSecretName: in.MachineDeployment.DataSecretName, Version: in.MachineDeployment.Version,
			RolloutAfter: in.MachineDeployment.RolloutAfter}
		desiredMachineDeployment(before, pool, rollout.Decision{Replicas: *in.MachineDeployment.SpecReplicas}, current)
		after := before.DeepCopy()
		desiredMachineDeployment(after, pool, plan.Decision, plan.MachineDeployment)

		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %d (%s): %s\nplan: %+v\ndecision: %+v", i, what, fmt.Sprintf(format, args...), pr, plan.Decision)
		}
		// The count the spec asks for, written out here rather than read
		// from the engine: spec.replicas, or for an autoscaled pool the
		// MachineDeployment's count clamped into autoScaling's bounds,
		// carried on Cluster API's autoscaler annotations.
		wantReplicas, wantBounds := int32(0), [2]string{}
		if a := pool.Spec.AutoScaling; a != nil {
			wantReplicas = min(max(*in.MachineDeployment.SpecReplicas, a.Min), a.Max)
			wantBounds = [2]string{strconv.Itoa(int(a.Min)), strconv.Itoa(int(a.Max))}
		} else {
			wantReplicas = *pool.Spec.Replicas
		}
		if got := ptr.Deref(after.Spec.Replicas, -1); got != wantReplicas {
			fail("the controller writes %d replicas; the spec asks for %d", got, wantReplicas)
		}
		if got := [2]string{after.Annotations[clusterv1.AutoscalerMinSizeAnnotation], after.Annotations[clusterv1.AutoscalerMaxSizeAnnotation]}; got != wantBounds {
			fail("the controller writes autoscaler bounds %v; the spec asks for %v", got, wantBounds)
		}
		templateMoves := ptr.Deref(after.Spec.Template.Spec.Bootstrap.DataSecretName, "") != ptr.Deref(before.Spec.Template.Spec.Bootstrap.DataSecretName, "")
		forcedAt := after.Spec.Rollout.After.Time
		forced := !after.Spec.Rollout.After.IsZero() && (before.Spec.Rollout.After.IsZero() || forcedAt.After(before.Spec.Rollout.After.Time))
		replaces := templateMoves || forced
		var replaced int32
		switch {
		case templateMoves:
			replaced = max(int32(len(in.MachineDeployment.MachinesCreated)), wantReplicas)
		case forced:
			for _, c := range in.MachineDeployment.MachinesCreated {
				if c.Before(forcedAt) {
					replaced++
				}
			}
			replaces = replaced > 0
		}
		if (pr.Rollout == cli.PlanNow) != replaces {
			fail("plan says %s; the controller's MachineDeployment replaces machines: %v", pr.Rollout, replaces)
		}
		if !replaces {
			continue
		}
		if plan.Record == nil || pr.Initiator != string(plan.Record.Initiator) {
			fail("plan names initiator %q; the controller records %+v", pr.Initiator, plan.Record)
		}
		if pr.Machines != replaced {
			fail("plan says %d machines; Cluster API replaces %d", pr.Machines, replaced)
		}
		per := mdutil.MaxSurge(*after) + mdutil.MaxUnavailable(*after)
		if want := (replaced + per - 1) / per; pr.Steps != want {
			fail("plan says %d steps; Cluster API's maxSurge %d + maxUnavailable %d of the written MachineDeployment make %d",
				pr.Steps, mdutil.MaxSurge(*after), mdutil.MaxUnavailable(*after), want)
		}
	}
	for _, r := range []string{cli.PlanNow, cli.PlanNone, cli.PlanDeferred, cli.PlanScheduled, cli.PlanInvalid} {
		if seen[r] == 0 {
			t.Errorf("no random case predicted %s (seen %v): the generator misses a kind of decision", r, seen)
		}
	}
}

// randomPool is a settled pool of 1 to 5 machines, with a random size,
// strategy, pause, forced requests, owner change and platform drift.
func randomPool(t *testing.T, rng *rand.Rand, now time.Time) (rollout.Input, string) {
	t.Helper()
	w := inputstest.New()
	var what []string
	note := func(format string, args ...any) { what = append(what, fmt.Sprintf(format, args...)) }
	pl, h, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	pool := w.Pool.DeepCopy()
	ud := rollout.UserData{Name: secrets.UserDataSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout,
		RolloutWithoutVersion: h.RolloutWithoutVersion, Version: pool.Spec.Release.Version, PayloadHash: pl.Hash}
	tok := rollout.Token{Name: secrets.TokenSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout, PayloadHash: pl.Hash, RotatedAt: now}
	live := int32(1 + rng.IntN(5))
	created := make([]time.Time, live)
	for i := range created {
		created[i] = now.Add(-time.Duration(1+rng.IntN(120)) * time.Minute).Truncate(time.Second)
	}
	note("%d machines", live)
	md := &rollout.MachineDeployment{DataSecretName: ud.Name, Version: ud.Version, RunningDataSecretName: ud.Name, Complete: true,
		SpecReplicas: ptr.To(live), Replicas: live, ReadyReplicas: live, UpToDateReplicas: live, MachinesCreated: created}
	if rng.IntN(3) == 0 {
		pool.Spec.Replicas = nil
		lo := int32(rng.IntN(3))
		pool.Spec.AutoScaling = &nodepoolv1.AutoScaling{Min: lo, Max: lo + int32(rng.IntN(4))}
		note("autoscaled %d-%d", lo, pool.Spec.AutoScaling.Max)
	} else {
		pool.Spec.Replicas = ptr.To(int32(1 + rng.IntN(5)))
		note("replicas %d", *pool.Spec.Replicas)
	}
	intOrPercent := func() *intstr.IntOrString {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return ptr.To(intstr.FromInt32(int32(rng.IntN(4))))
		}
		return ptr.To(intstr.FromString(fmt.Sprintf("%d%%", 10*rng.IntN(11))))
	}
	pool.Spec.Management.Replace.RollingUpdate = nodepoolv1.RollingUpdate{MaxSurge: intOrPercent(), MaxUnavailable: intOrPercent()}
	note("rolling update %v/%v", pool.Spec.Management.Replace.RollingUpdate.MaxSurge, pool.Spec.Management.Replace.RollingUpdate.MaxUnavailable)
	pool.Annotations = map[string]string{nodepoolv1.AnnotationCurrentRolloutConfig: h.RolloutWithoutVersion, nodepoolv1.AnnotationCurrentPayload: pl.Hash}
	pool.Status.Version = pool.Spec.Release.Version

	switch rng.IntN(4) {
	case 1:
		pool.Spec.Management.PausedUntil = "true"
	case 2:
		pool.Spec.Management.PausedUntil = now.Add(time.Hour).Format(time.RFC3339)
	case 3:
		pool.Spec.Management.PausedUntil = now.Add(-time.Minute).Format(time.RFC3339)
	}
	note("pausedUntil %q", pool.Spec.Management.PausedUntil)
	when := func() time.Time {
		switch rng.IntN(3) {
		case 0:
			return now.Add(-3 * time.Hour) // before every machine
		case 1:
			return now.Add(-time.Duration(rng.IntN(90)) * time.Minute)
		}
		return now.Add(time.Hour)
	}
	if rng.IntN(2) == 0 {
		at := when().Truncate(time.Second)
		pool.Spec.Management.RolloutAfter = &metav1.Time{Time: at}
		note("rolloutAfter %s", at.Format(time.RFC3339))
	}
	if rng.IntN(3) == 0 {
		at := when().Truncate(time.Second)
		pool.Annotations[nodepoolv1.AnnotationApplyPending] = at.Format(time.RFC3339)
		note("apply-pending %s", at.Format(time.RFC3339))
	}
	if rng.IntN(3) == 0 {
		pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
		note("managementUpdates Rollout")
	}
	switch rng.IntN(4) {
	case 1:
		pool.Spec.Release.Version = "v1.36.4"
		note("version change")
	case 2:
		w.UserConfigs[0].Data[inputs.ConfigKey] = strings.Replace(inputstest.ChronyConfig, "time.corp", "ntp.corp", 1)
		note("config change")
	}
	w.Pool.Spec = pool.Spec
	if rng.IntN(3) == 0 {
		w.Management.Data[inputs.ManagementConfigKey] = strings.Replace(w.Management.Data[inputs.ManagementConfigKey], "sha256:aaaa", "sha256:eeee", 1)
		pool.Status.PendingManagementChanges = []nodepoolv1.PendingManagementChange{{Component: inputs.APIServerProxy.Name(),
			Since: metav1.NewTime(now.Add(-time.Duration(rng.IntN(90)) * time.Minute).Truncate(time.Second))}}
		note("platform drift")
	}
	in := rollout.Input{Pool: pool, Now: now, MachineDeployment: md,
		UserData: map[string]rollout.UserData{ud.Name: ud}, Tokens: map[string]rollout.Token{tok.Name: tok},
		Payloads: map[string]*payload.Payload{pl.Hash: pl}, Referenced: map[string]bool{ud.Name: true},
		Settings: rollout.Settings{TokenTTL: 4 * time.Hour, CleanupGracePeriod: 10 * time.Minute}}
	if rng.IntN(12) == 0 {
		in.RenderErr = errors.New("the chrony ConfigMap is not valid")
		note("render error")
		return in, strings.Join(what, ", ")
	}
	latest, hashes, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	in.Latest, in.Hashes = latest, hashes
	if rng.IntN(4) == 0 {
		at := now.Add(-2 * time.Hour).Truncate(time.Second)
		md.RolloutAfter = &at
		note("MachineDeployment rollout.after %s", at.Format(time.RFC3339))
	}
	return in, strings.Join(what, ", ")
}
