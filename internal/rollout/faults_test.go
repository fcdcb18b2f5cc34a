package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// Faults and odd inputs: what a deleted or edited object, a value the API
// would refuse today, or a payload that no longer fits does to a decision.

func TestAnUnparsablePausedUntilHoldsThePool(t *testing.T) {
	for _, v := range []string{"2027-02-30T00:00:00Z", "2027-13-01T00:00:00Z", "2027-02-28T25:00:00Z", "tomorrow"} {
		t.Run(v, func(t *testing.T) {
			w := inputstest.New()
			in := settled(t, w)
			old := in.MachineDeployment.DataSecretName
			w.Pool.Spec.Release.Version = "v1.36.4"
			w.Pool.Spec.Management.PausedUntil = v
			in = relatest(t, in, w)
			p := Decide(in)
			if p.MachineDeployment.DataSecretName != old {
				t.Fatal("an unparsable pausedUntil must hold the pool, not start the rollout")
			}
			c := cond(p, nodepoolv1.ConditionUpdatingVersion)
			if c.Reason != nodepoolv1.ReasonPaused || !strings.Contains(c.Message, "is not an RFC3339 time") {
				t.Errorf("UpdatingVersion = %+v, want reason Paused saying the value is not a time", c)
			}
			if !p.Decision.Pause.Paused || p.Decision.Action != ActionDefer {
				t.Errorf("decision %+v: want the pool held as paused, the rollout deferred (the CLI reads this decision)", p.Decision)
			}
		})
	}
}

func TestADeletedCurrentUserDataChangesNoDecision(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	current := in.MachineDeployment.DataSecretName
	// The owner changed the version while the pool is paused; then
	// someone deletes the user-data Secret the machines run.
	w.Pool.Spec.Release.Version = "v1.36.4"
	w.Pool.Spec.Management.PausedUntil = "true"
	in = relatest(t, in, w)
	want := in.UserData[current]
	delete(in.UserData, current)

	p := Decide(in)
	if p.MachineDeployment == nil || p.MachineDeployment.DataSecretName != current {
		t.Fatalf("target = %+v, want the current user-data %s kept", p.MachineDeployment, current)
	}
	if p.Record != nil || hasEvent(p, "RolloutStarted") {
		t.Fatalf("a deleted Secret started a rollout: record %+v", p.Record)
	}
	var restored *UserDataAction
	for i := range p.UserData {
		if p.UserData[i].Name == current {
			restored = &p.UserData[i]
		}
	}
	if restored == nil || !restored.Create {
		t.Fatalf("user-data actions %+v, want %s re-created", p.UserData, current)
	}
	if restored.RolloutHash != want.RolloutHash || restored.PayloadHash != want.PayloadHash ||
		restored.RolloutWithoutVersion != want.RolloutWithoutVersion || restored.Version != want.Version {
		t.Errorf("restored %+v, want the hashes the machines run %+v", restored.UserData, want)
	}
	if tok := targetToken(t, p); tok.PayloadHash != want.PayloadHash {
		t.Errorf("token serves %s, want the pinned payload %s", tok.PayloadHash, want.PayloadHash)
	}
	if c := cond(p, nodepoolv1.ConditionUpdatingVersion); c.Reason != nodepoolv1.ReasonPaused {
		t.Errorf("UpdatingVersion = %+v, want the held rollout still shown as paused", c)
	}
	if len(p.Pending) != 0 {
		t.Errorf("pending drift = %+v, want none (nothing changed on the platform side)", p.Pending)
	}
	if !hasEvent(p, "UserDataRestored") {
		t.Errorf("events %+v, want UserDataRestored", p.Events)
	}

	// With its token gone too nothing can be rebuilt: the pool holds.
	delete(in.Tokens, secrets.TokenSecretName(in.Pool.Name, want.RolloutHash))
	p = Decide(in)
	if p.MachineDeployment != nil || p.Record != nil {
		t.Fatalf("target %+v, record %+v: want the MachineDeployment left as it is", p.MachineDeployment, p.Record)
	}
	if c := cond(p, nodepoolv1.ConditionBootstrapDataAvailable); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, current) {
		t.Errorf("BootstrapDataAvailable = %+v, want False naming %s", c, current)
	}
}

func TestARecreatedMachineDeploymentIsNotRecordedAsANewPool(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	current := in.MachineDeployment.DataSecretName
	in.MachineDeployment = nil
	in.Referenced = map[string]bool{}
	p := Decide(in)
	if p.MachineDeployment == nil || p.MachineDeployment.DataSecretName != current {
		t.Fatalf("target = %+v, want %s", p.MachineDeployment, current)
	}
	if p.Record != nil {
		t.Errorf("record %+v: recreating a deleted MachineDeployment with unchanged hashes is not a rollout", p.Record)
	}
}

func TestAPayloadTooLargeKeepsEverythingRunning(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	old := in.MachineDeployment.DataSecretName
	in.Latest, in.Hashes = nil, payload.Hashes{}
	in.RenderErr = &PayloadTooLargeError{Bytes: 1500000, Limit: 1032192}
	p := Decide(in)
	if p.MachineDeployment == nil || p.MachineDeployment.DataSecretName != old || p.Record != nil {
		t.Fatalf("target %+v, record %+v: want the running target kept", p.MachineDeployment, p.Record)
	}
	c := cond(p, nodepoolv1.ConditionValidGeneratedPayload)
	if c.Status != metav1.ConditionFalse || c.Reason != nodepoolv1.ReasonPayloadTooLarge || !strings.Contains(c.Message, "1500000") || !strings.Contains(c.Message, "1032192") {
		t.Errorf("ValidGeneratedPayload = %+v, want False naming the size and the limit", c)
	}
}

func TestATokenWhosePayloadIsGoneServesTheLatestAndSaysSo(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	pinned := in.MachineDeployment.DataSecretName
	bumpProxyImage(w)
	in = relatest(t, in, w)
	in.Payloads = map[string]*payload.Payload{}
	p := Decide(in)
	if p.MachineDeployment.DataSecretName != pinned || p.Record != nil {
		t.Fatalf("a missing payload must roll nothing: target %+v, record %+v", p.MachineDeployment, p.Record)
	}
	if tok := targetToken(t, p); tok.PayloadHash != in.Latest.Hash {
		t.Errorf("token serves %s, want the latest %s", payload.Short(tok.PayloadHash), payload.Short(in.Latest.Hash))
	}
	if len(p.Payloads) != 1 || p.Payloads[0].Hash != in.Latest.Hash || !hasEvent(p, "PayloadMissing") {
		t.Errorf("payloads %d, events %+v: want the latest stored and PayloadMissing", len(p.Payloads), p.Events)
	}
}

func TestARotatedPullSecretReachesNewMachinesDuringARollout(t *testing.T) {
	w := inputstest.New()
	in, _, newUD, started := halfwayThroughAVersionRollout(t, w)
	// The credential rotates mid-rollout (and the proxy image changes).
	w.PullSecret.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"registry.example":{"auth":"dXNlcjpuZXc="}}}`)
	bumpProxyImage(w)
	in.Now = t0.Add(5 * time.Minute)
	in = relatest(t, in, w)
	p := Decide(in)
	tok := targetToken(t, p)
	if tok.PayloadHash == started.PayloadHash {
		t.Fatal("the rotated pull secret must reach the machines the rollout still makes")
	}
	var served *payload.Payload
	for _, pl := range p.Payloads {
		if pl.Hash == tok.PayloadHash {
			served = pl
		}
	}
	if served == nil {
		t.Fatal("the payload the token serves is not stored")
	}
	startedPayload := in.Payloads[started.PayloadHash]
	for _, ch := range payload.Diff(startedPayload.Manifest, served.Manifest) {
		if !ch.Component.IsFresh() {
			t.Errorf("component %s changed mid-rollout; only fresh components may", ch.Component.Name())
		}
	}
	if p.Record != nil || p.MachineDeployment.DataSecretName != newUD.Name {
		t.Errorf("a credential rotation must start no rollout: record %+v", p.Record)
	}
}

func TestADeletedTokenOfAnOlderRolloutStillInUseIsMadeAgain(t *testing.T) {
	w := inputstest.New()
	in, oldUD, _, _ := halfwayThroughAVersionRollout(t, w)
	old := in.UserData[oldUD]
	oldToken := secrets.TokenSecretName(in.Pool.Name, old.RolloutHash)
	delete(in.Tokens, oldToken)
	p := Decide(in)
	var tok *TokenAction
	for i := range p.Tokens {
		if p.Tokens[i].Name == oldToken {
			tok = &p.Tokens[i]
		}
	}
	if tok == nil || !tok.Create || tok.PayloadHash != old.PayloadHash {
		t.Fatalf("tokens %+v: want %s made again, serving %s", p.Tokens, oldToken, payload.Short(old.PayloadHash))
	}
	rewritten := false
	for _, a := range p.UserData {
		rewritten = rewritten || (a.Name == oldUD && a.TokenName == oldToken)
	}
	if !rewritten {
		t.Errorf("user-data %s must carry the new token: %+v", oldUD, p.UserData)
	}
}
