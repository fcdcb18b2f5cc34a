package rollout

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var settings = Settings{TokenTTL: 4 * time.Hour, CleanupGracePeriod: 10 * time.Minute}

func render(t *testing.T, w *inputstest.World) (*payload.Payload, payload.Hashes) {
	t.Helper()
	pl, h, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	return pl, h
}

// settled returns the input of a pool whose 3 machines all run the payload
// of the world as it is now, with annotations set.
func settled(t *testing.T, w *inputstest.World) Input {
	t.Helper()
	pl, h := render(t, w)
	pool := w.Pool.DeepCopy()
	ud := UserData{
		Name: secrets.UserDataSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout,
		RolloutWithoutVersion: h.RolloutWithoutVersion, Version: pool.Spec.Release.Version,
		PayloadHash: pl.Hash, Created: t0.Add(-time.Hour),
	}
	tok := Token{Name: secrets.TokenSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout, PayloadHash: pl.Hash,
		RotatedAt: t0.Add(-time.Hour), Created: t0.Add(-time.Hour)}
	pool.Annotations = map[string]string{
		nodepoolv1.AnnotationCurrentRolloutConfig: h.RolloutWithoutVersion,
		nodepoolv1.AnnotationCurrentPayload:       pl.Hash,
	}
	pool.Status.Version = pool.Spec.Release.Version
	return Input{
		Pool: pool, Now: t0, Latest: pl, Hashes: h,
		MachineDeployment: &MachineDeployment{DataSecretName: ud.Name, Version: ud.Version, Complete: true,
			Replicas: 3, ReadyReplicas: 3, UpToDateReplicas: 3,
			MachinesCreated: []time.Time{t0.Add(-time.Hour), t0.Add(-time.Hour), t0.Add(-time.Hour)}},
		UserData:   map[string]UserData{ud.Name: ud},
		Tokens:     map[string]Token{tok.Name: tok},
		Payloads:   map[string]*payload.Payload{pl.Hash: pl},
		Referenced: map[string]bool{ud.Name: true},
		Nodes:      []Node{{Name: "n1", Payload: payload.Short(pl.Hash), Ready: true}},
		Settings:   settings,
	}
}

// relatest re-renders the latest payload after the world changed.
func relatest(t *testing.T, in Input, w *inputstest.World) Input {
	t.Helper()
	in.Latest, in.Hashes = render(t, w)
	in.Pool.Spec = w.Pool.Spec
	return in
}

func cond(p Plan, typ string) metav1.Condition {
	for _, c := range p.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func targetToken(t *testing.T, p Plan) TokenAction {
	t.Helper()
	if p.MachineDeployment == nil {
		t.Fatal("no MachineDeployment target")
	}
	for _, a := range p.Tokens {
		if strings.Replace(a.Name, "-token-", "-userdata-", 1) == p.MachineDeployment.DataSecretName {
			return a
		}
	}
	t.Fatalf("no token for target %s", p.MachineDeployment.DataSecretName)
	return TokenAction{}
}

func hasEvent(p Plan, reason string) bool {
	for _, e := range p.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func TestANewPoolTargetsTheLatestPayload(t *testing.T) {
	w := inputstest.New()
	pl, h := render(t, w)
	p := Decide(Input{Pool: w.Pool, Now: t0, Latest: pl, Hashes: h, Settings: settings})
	if p.MachineDeployment == nil || p.MachineDeployment.DataSecretName != secrets.UserDataSecretName("workers", h.Rollout) {
		t.Fatalf("target = %+v", p.MachineDeployment)
	}
	tok := targetToken(t, p)
	if !tok.Create || tok.PayloadHash != pl.Hash {
		t.Errorf("token = %+v, want created and serving the latest payload", tok)
	}
	if len(p.Payloads) != 1 || p.Payloads[0].Hash != pl.Hash {
		t.Errorf("payloads to store = %d, want the latest", len(p.Payloads))
	}
	if hasEvent(p, "RolloutStarted") {
		t.Error("creating a pool is not a rollout")
	}
}

func TestOwnerChangesRollTheMachines(t *testing.T) {
	for name, change := range map[string]func(w *inputstest.World){
		"release version": func(w *inputstest.World) { w.Pool.Spec.Release.Version = "v1.36.4" },
		"user config": func(w *inputstest.World) {
			w.UserConfigs[0].Data[inputs.ConfigKey] = strings.Replace(inputstest.ChronyConfig, "time.corp", "ntp.corp", 1)
		},
		"proxy spec":       func(w *inputstest.World) { w.Pool.Spec.Proxy.HTTPProxy = "http://other.corp.example:3128" },
		"registry mirrors": func(w *inputstest.World) { w.Pool.Spec.RegistryMirrors = w.Pool.Spec.RegistryMirrors[:1] },
		"pull secret name": func(w *inputstest.World) {
			w.Pool.Spec.PullSecretRef.Name = "pull-secret-2"
			w.PullSecret.Name = "pull-secret-2"
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := inputstest.New()
			in := settled(t, w)
			old := in.MachineDeployment.DataSecretName
			change(w)
			in = relatest(t, in, w)
			p := Decide(in)
			if p.MachineDeployment.DataSecretName == old {
				t.Fatal("an owner change must point the MachineDeployment at new user-data")
			}
			if tok := targetToken(t, p); !tok.Create || tok.PayloadHash != in.Latest.Hash {
				t.Errorf("new token = %+v, want created, serving the latest payload", tok)
			}
			if !hasEvent(p, "RolloutStarted") {
				t.Error("no RolloutStarted event")
			}
		})
	}
}

func TestManagementDriftDoesNotReplaceMachines(t *testing.T) {
	for name, tc := range map[string]struct {
		change    func(w *inputstest.World)
		component string
		fresh     bool
	}{
		"API-server proxy image bump": {func(w *inputstest.World) {
			w.Management.Data[inputs.ManagementConfigKey] = strings.Replace(w.Management.Data[inputs.ManagementConfigKey], "sha256:aaaa", "sha256:bbbb", 1)
		}, "apiserver-proxy", false},
		"registry override added": {func(w *inputstest.World) {
			w.Management.Data[inputs.ManagementConfigKey] = strings.Replace(w.Management.Data[inputs.ManagementConfigKey],
				"registryOverrides:\n", "registryOverrides:\n  - {source: registry.k8s.io, mirror: mirror.platform.example/k8s}\n", 1)
		}, "registry-overrides", false},
		"extra NoProxy": {func(w *inputstest.World) {
			w.Management.Data[inputs.ManagementConfigKey] = strings.Replace(w.Management.Data[inputs.ManagementConfigKey], "[.platform.example]", "[.platform.example, .extra.example]", 1)
		}, "proxy-defaults", false},
		"renderer version (nodepool upgrade)": {func(w *inputstest.World) { w.Settings.RendererVersion = "v0.2.0" }, "renderer", false},
		"pull secret content": {func(w *inputstest.World) {
			w.PullSecret.Data[".dockerconfigjson"] = []byte(`{"auths":{"registry.example":{"auth":"bmV3OmNyZWQ="}}}`)
		}, "pull-secret", true},
	} {
		t.Run(name, func(t *testing.T) {
			w := inputstest.New()
			in := settled(t, w)
			running := in.Latest
			old := in.MachineDeployment.DataSecretName
			tc.change(w)
			in = relatest(t, in, w)
			p := Decide(in)
			if p.MachineDeployment.DataSecretName != old {
				t.Fatal("management drift must not point the MachineDeployment at new user-data")
			}
			for _, u := range p.UserData {
				if u.Create {
					t.Errorf("new user-data %s for a management change", u.Name)
				}
			}
			for _, a := range p.Tokens {
				if a.Create {
					t.Errorf("new token %s for a management change", a.Name)
				}
			}
			c := cond(p, nodepoolv1.ConditionConfigUpdatePending)
			if c.Status != metav1.ConditionTrue || c.Reason != nodepoolv1.ReasonManagementConfigDrift || !strings.Contains(c.Message, tc.component) {
				t.Errorf("ConfigUpdatePending = %+v, want True naming %s", c, tc.component)
			}
			if len(p.Pending) != 1 || p.Pending[0].Component != tc.component {
				t.Errorf("pending = %+v, want exactly %s", p.Pending, tc.component)
			}
			// A platform bump drifts every pool at once: no event on each
			// (one on the management config says it); a change in the
			// pool's own namespace is an event on the pool.
			if got := hasEvent(p, nodepoolv1.EventManagementConfigDrift); got != tc.fresh {
				t.Errorf("ManagementConfigDrift event on the pool: %v, want %v (only for the pool's own pull secret or trust bundle)", got, tc.fresh)
			}
			// What a scale-up boots (OnNextRollout): pinned components as the
			// running nodes have them, fresh ones current.
			tok := targetToken(t, p)
			if !tc.fresh && tok.PayloadHash != running.Hash {
				t.Errorf("a pinned change moved the token to %s; new nodes must match the running ones (%s)", tok.PayloadHash, running.Hash)
			}
			if tc.fresh {
				var served *payload.Payload
				for _, q := range p.Payloads {
					if q.Hash == tok.PayloadHash {
						served = q
					}
				}
				if served == nil {
					t.Fatal("a fresh change must move the token to a stored composed payload")
				}
				if served.Manifest[inputs.PullSecret] != in.Latest.Manifest[inputs.PullSecret] {
					t.Error("new nodes must get the current credential")
				}
			}
		})
	}
}

func TestNewNodesPolicyServesTheLatestPayload(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
	in := settled(t, w)
	w.Settings.RendererVersion = "v0.9.0"
	in = relatest(t, in, w)
	p := Decide(in)
	if tok := targetToken(t, p); tok.PayloadHash != in.Latest.Hash || tok.Create {
		t.Errorf("token = %+v, want the existing token serving the latest payload", tok)
	}
	if !strings.Contains(cond(p, nodepoolv1.ConditionConfigUpdatePending).Message, "NewNodes") {
		t.Error("the condition must say new nodes get the latest payload")
	}
}

func TestPausedPoolDefersAnOwnerChange(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	old := in.MachineDeployment.DataSecretName
	w.Pool.Spec.Release.Version = "v1.36.4"
	w.Pool.Spec.Management.PausedUntil = t0.Add(time.Hour).Format(time.RFC3339)
	in = relatest(t, in, w)
	p := Decide(in)
	if p.MachineDeployment.DataSecretName != old {
		t.Fatal("a paused pool must not start a rollout")
	}
	c := cond(p, nodepoolv1.ConditionUpdatingVersion)
	if c.Reason != nodepoolv1.ReasonPaused || !strings.Contains(c.Message, "2026-11-30T13:00:00Z") {
		t.Errorf("UpdatingVersion = %+v, want reason Paused and the time", c)
	}
	if p.RequeueAfter == 0 || p.RequeueAfter > time.Hour+time.Second {
		t.Errorf("requeue after %v, want at the pause expiry", p.RequeueAfter)
	}
	in.Now = t0.Add(time.Hour)
	if p := Decide(in); p.MachineDeployment.DataSecretName == old {
		t.Error("the pending rollout must start when the pause expires")
	}
}

// halfwayThroughAVersionRollout returns the input of a settled pool whose
// owner changed the version, once the controller applied the plan and
// Cluster API is halfway: the running and the new user-data, and the token
// the rollout started with.
func halfwayThroughAVersionRollout(t *testing.T, w *inputstest.World) (in Input, oldUD string, newUD UserData, started TokenAction) {
	t.Helper()
	in = settled(t, w)
	oldUD = in.MachineDeployment.DataSecretName
	w.Pool.Spec.Release.Version = "v1.36.4"
	in = relatest(t, in, w)
	p := Decide(in)
	started = targetToken(t, p)
	newUD = UserData{Name: p.MachineDeployment.DataSecretName, RolloutHash: in.Hashes.Rollout,
		RolloutWithoutVersion: in.Hashes.RolloutWithoutVersion, Version: "v1.36.4", PayloadHash: started.PayloadHash, Created: t0}
	in.UserData[newUD.Name] = newUD
	in.Tokens[started.Name] = Token{Name: started.Name, RolloutHash: newUD.RolloutHash, PayloadHash: started.PayloadHash, RotatedAt: t0, Created: t0}
	in.Payloads[in.Latest.Hash] = in.Latest
	in.Referenced[newUD.Name] = true
	in.MachineDeployment = &MachineDeployment{DataSecretName: newUD.Name, Version: "v1.36.4", RunningDataSecretName: oldUD, Replicas: 4, ReadyReplicas: 3, UpToDateReplicas: 1}
	in.Pool.Status.Updating = "Version"
	return in, oldUD, newUD, started
}

func TestARolloutInProgressKeepsThePayloadItStartedWith(t *testing.T) {
	w := inputstest.New()
	in, oldUD, newUD, started := halfwayThroughAVersionRollout(t, w)
	// The platform bumps the proxy image mid-rollout.
	w.Management.Data[inputs.ManagementConfigKey] = strings.Replace(w.Management.Data[inputs.ManagementConfigKey], "sha256:aaaa", "sha256:cccc", 1)
	in.Now = t0.Add(5 * time.Minute)
	in = relatest(t, in, w)
	p := Decide(in)
	if p.MachineDeployment.DataSecretName != newUD.Name {
		t.Fatal("a management change must not supersede a rollout")
	}
	if tok := targetToken(t, p); tok.PayloadHash != started.PayloadHash {
		t.Errorf("token moved to %s mid-rollout; it must keep %s", tok.PayloadHash, started.PayloadHash)
	}
	if c := cond(p, nodepoolv1.ConditionUpdatingVersion); c.Status != metav1.ConditionTrue {
		t.Errorf("UpdatingVersion = %+v", c)
	}
	for _, name := range p.Delete {
		if name == oldUD || name == newUD.Name {
			t.Errorf("deleted %s, which machines use", name)
		}
	}
	// CAPI completes: annotations advance, the drift shows.
	in.MachineDeployment = &MachineDeployment{DataSecretName: newUD.Name, Version: "v1.36.4", Complete: true, Replicas: 3, ReadyReplicas: 3, UpToDateReplicas: 3}
	delete(in.Referenced, oldUD)
	p = Decide(in)
	if p.Annotations[nodepoolv1.AnnotationCurrentPayload] != started.PayloadHash || p.Version != "v1.36.4" || p.Updating != "" {
		t.Errorf("after completion: annotations %v, version %q, updating %q", p.Annotations, p.Version, p.Updating)
	}
	if !hasEvent(p, "RolloutComplete") {
		t.Error("no RolloutComplete event")
	}
	if c := cond(p, nodepoolv1.ConditionConfigUpdatePending); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "apiserver-proxy") {
		t.Errorf("ConfigUpdatePending after the rollout = %+v", c)
	}
}

func TestMissingOrWrongAnnotationsAreSeededFromWhatMachinesRun(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	want := in.Pool.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig]
	old := in.MachineDeployment.DataSecretName
	// A spec change made while the controller was away must still roll.
	w.Pool.Spec.Config = w.Pool.Spec.Config[:1]
	in = relatest(t, in, w)
	for name, set := range map[string]func(){
		"missing": func() { delete(in.Pool.Annotations, nodepoolv1.AnnotationCurrentRolloutConfig) },
		"wrong": func() {
			in.Pool.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig] = in.Hashes.RolloutWithoutVersion
		},
	} {
		t.Run(name, func(t *testing.T) {
			set()
			p := Decide(in)
			if got := p.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig]; got != want {
				t.Errorf("annotation = %q, want %q (from the running user-data, not the current inputs)", got, want)
			}
			if !hasEvent(p, "Seeded") && !hasEvent(p, "Corrected") {
				t.Error("no event for the seed")
			}
			if p.MachineDeployment.DataSecretName == old {
				t.Error("the spec change made meanwhile was absorbed instead of rolled out")
			}
		})
	}
}

func TestABadConfigKeepsEverythingRunning(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	old := in.MachineDeployment.DataSecretName
	in.Latest, in.Hashes = nil, payload.Hashes{}
	in.RenderErr = &inputs.ConfigError{Reason: nodepoolv1.ReasonInvalidConfig, Kind: "ConfigMap",
		Object: types.NamespacedName{Namespace: "team-a", Name: "chrony"}, Err: errors.New("document 2: not YAML")}
	p := Decide(in)
	if p.MachineDeployment == nil || p.MachineDeployment.DataSecretName != old {
		t.Fatal("a bad config must keep the MachineDeployment's target")
	}
	if tok := targetToken(t, p); tok.PayloadHash != in.UserData[old].PayloadHash {
		t.Error("a bad config must keep the token serving the pinned payload, so scale-up works")
	}
	c := cond(p, nodepoolv1.ConditionValidMachineConfig)
	if c.Status != metav1.ConditionFalse || c.Reason != nodepoolv1.ReasonInvalidConfig || !strings.Contains(c.Message, "chrony") {
		t.Errorf("ValidMachineConfig = %+v", c)
	}
	if len(p.Delete) != 0 {
		t.Errorf("deleted %v", p.Delete)
	}
}

func TestCleanupIsByReferenceAndAfterTheGracePeriod(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	pool := in.Pool.Name
	stale := UserData{Name: secrets.UserDataSecretName(pool, "aaaa"), RolloutHash: "aaaa", PayloadHash: "pppp", Created: t0.Add(-time.Hour)}
	used := UserData{Name: secrets.UserDataSecretName(pool, "bbbb"), RolloutHash: "bbbb", PayloadHash: "qqqq", Created: t0.Add(-48 * time.Hour)}
	fresh := UserData{Name: secrets.UserDataSecretName(pool, "cccc"), RolloutHash: "cccc", PayloadHash: "rrrr", Created: t0.Add(-time.Minute)}
	for _, u := range []UserData{stale, used, fresh} {
		in.UserData[u.Name] = u
		tn := secrets.TokenSecretName(pool, u.RolloutHash)
		in.Tokens[tn] = Token{Name: tn, RolloutHash: u.RolloutHash, PayloadHash: u.PayloadHash, RotatedAt: u.Created, Created: u.Created}
		in.Payloads[u.PayloadHash] = &payload.Payload{Pool: pool, Hash: u.PayloadHash}
	}
	in.Referenced[used.Name] = true // a MachineSet or a Machine still boots from it
	// The grace period counts from the moment a Secret was found unused,
	// not from its creation: used for 48 hours, then unused for a minute,
	// it stays.
	unusedAnHour, unusedAMinute := t0.Add(-time.Hour), t0.Add(-time.Minute)
	u := in.UserData[stale.Name]
	u.UnreferencedSince = &unusedAnHour
	in.UserData[stale.Name] = u
	recent := UserData{Name: secrets.UserDataSecretName(pool, "dddd"), RolloutHash: "dddd", PayloadHash: "ssss", Created: t0.Add(-48 * time.Hour), UnreferencedSince: &unusedAMinute}
	in.UserData[recent.Name] = recent
	u = in.UserData[used.Name]
	u.UnreferencedSince = &unusedAnHour // in use again (a rollback)
	in.UserData[used.Name] = u
	p := Decide(in)
	got := sets.New(p.Delete...)
	want := sets.New(stale.Name, secrets.TokenSecretName(pool, "aaaa"), secrets.PayloadSecretName(pool, "pppp"))
	if !got.Equal(want) {
		t.Errorf("deleted %v, want %v", sets.List(got), sets.List(want))
	}
	if m := sets.New(p.MarkUnreferenced...); !m.Equal(sets.New(fresh.Name)) {
		t.Errorf("marked unreferenced %v, want only %s (found unused for the first time)", sets.List(m), fresh.Name)
	}
	if m := sets.New(p.MarkReferenced...); !m.Equal(sets.New(used.Name)) {
		t.Errorf("marked referenced %v, want %s", sets.List(m), used.Name)
	}
}

func TestTokensRotateAtHalfTheirTTLWithoutRolling(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	old := in.MachineDeployment.DataSecretName
	in.Now = t0.Add(time.Hour) // rotated at t0-1h, TTL 4h: due at t0+1h
	p := Decide(in)
	if tok := targetToken(t, p); !tok.Rotate {
		t.Errorf("token not rotated at half its TTL: %+v", tok)
	}
	if p.MachineDeployment.DataSecretName != old {
		t.Error("a token rotation must not roll machines")
	}
	in.Now = t0
	if tok := targetToken(t, Decide(in)); tok.Rotate {
		t.Error("rotated too early")
	}
}

func TestRepeatedReconcilesOfASettledPoolChangeNothing(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	p := Decide(in)
	if len(p.Payloads) != 0 || len(p.Delete) != 0 || len(p.Annotations) != 0 || len(p.Events) != 0 {
		t.Errorf("a settled pool got a non-empty plan: payloads %d, delete %v, annotations %v, events %v", len(p.Payloads), p.Delete, p.Annotations, p.Events)
	}
	for _, a := range append([]TokenAction{}, p.Tokens...) {
		if a.Create || a.Rotate {
			t.Errorf("token action %+v", a)
		}
	}
}
