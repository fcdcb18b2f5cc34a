package payload_test

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
)

// TestComposeRebuildsAStoredPayload: a payload Secret needs only its
// fragments; composing them again gives the same bytes and hash.
func TestComposeRebuildsAStoredPayload(t *testing.T) {
	p, _ := render(t, inputstest.New())
	again, err := payload.Compose(p.Pool, maps.Clone(p.Fragments))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Ignition, p.Ignition) || again.Hash != p.Hash {
		t.Error("composing the fragments of a payload gave another payload")
	}
}

func components(cs []payload.Change) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Component.Name())
	}
	return strings.Join(names, ",")
}

// TestComposePinned: under OnNextRollout a new node boots the pinned
// components of the running nodes and the current fresh ones.
func TestComposePinned(t *testing.T) {
	running, _ := render(t, inputstest.New())

	tests := []struct {
		name   string
		mutate func(w *inputstest.World)
		// Components in which the composed payload differs from running,
		// and from latest.
		fromRunning, fromLatest string
	}{
		{"nothing changed", func(*inputstest.World) {}, "", ""},
		{"a pinned component changed: new nodes match old ones", func(w *inputstest.World) {
			w.Management.Data["config"] = strings.Replace(w.Management.Data["config"], "sha256:aaaa", "sha256:bbbb", 1)
		}, "", "apiserver-proxy"},
		{"a fresh component changed: new nodes get it", func(w *inputstest.World) {
			w.PullSecret.Data[".dockerconfigjson"] = []byte(`{"auths":{"registry.example":{"auth":"cm90YXRlZA=="}}}`)
		}, "pull-secret", ""},
		{"pinned and fresh changed", func(w *inputstest.World) {
			w.Management.Data["config"] += "metadataAddress: 169.254.169.253\n"
			w.PullSecret.Data[".dockerconfigjson"] = []byte(`{"auths":{}}`)
			w.Settings.PayloadServerURL = "https://payload2.example/ignition"
			w.Settings.RendererVersion = "v0.2.0"
		}, "pull-secret,payload-server", "proxy-defaults,renderer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := inputstest.New()
			tt.mutate(w)
			latest, _ := render(t, w)
			composed, err := payload.ComposePinned(running, latest)
			if err != nil {
				t.Fatal(err)
			}
			if got := components(payload.Diff(running.Manifest, composed.Manifest)); got != tt.fromRunning {
				t.Errorf("differs from running in %q, want %q", got, tt.fromRunning)
			}
			if got := components(payload.Diff(composed.Manifest, latest.Manifest)); got != tt.fromLatest {
				t.Errorf("differs from latest in %q, want %q", got, tt.fromLatest)
			}
			if (tt.fromRunning == "") != (composed.Hash == running.Hash) {
				t.Errorf("composed hash %s, running %s", composed.Hash, running.Hash)
			}
		})
	}
}

func TestComposeRefuses(t *testing.T) {
	p, _ := render(t, inputstest.New())
	tests := []struct {
		name   string
		pool   string
		mutate func(map[inputs.Component][]byte)
		want   string
	}{
		{"a missing fragment", "workers", func(f map[inputs.Component][]byte) { delete(f, inputs.Renderer) }, "no fragment for component renderer"},
		{"the zero component", "workers", func(f map[inputs.Component][]byte) { f[inputs.Component{}] = nil }, "unknown component"},
		{"a fragment that is not Ignition", "workers", func(f map[inputs.Component][]byte) { f[inputs.Renderer] = []byte(`{"ignition":{}}`) }, "the fragment of component renderer is not a valid Ignition config"},
		{"two components writing one path differently", "workers", func(f map[inputs.Component][]byte) {
			f[inputs.Renderer] = []byte(strings.Replace(string(f[inputs.PayloadServer]), "payload-server.json", "release.json", 1))
		}, "component release and component renderer both declare path /etc/nodepool/release.json, differently"},
		{"two components writing one path alike is fine", "workers", func(f map[inputs.Component][]byte) { f[inputs.Renderer] = f[inputs.Release] }, ""},
		{"a pool name too long for a label", strings.Repeat("p", 64), func(map[inputs.Component][]byte) {}, "longer than 63 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := maps.Clone(p.Fragments)
			tt.mutate(f)
			_, err := payload.Compose(tt.pool, f)
			if tt.want == "" {
				if err != nil {
					t.Errorf("got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestConflictErrorIsTyped(t *testing.T) {
	p, _ := render(t, inputstest.New())
	f := maps.Clone(p.Fragments)
	f[inputs.Renderer] = []byte(strings.Replace(string(f[inputs.PayloadServer]), "payload-server.json", "release.json", 1))
	_, err := payload.Compose("workers", f)
	var ce *payload.ConflictError
	if !errors.As(err, &ce) || ce.First != inputs.Release || ce.Second != inputs.Renderer || ce.Claim != "path "+payload.ReleasePath {
		t.Errorf("got %#v", err)
	}
}

func TestDiffIsPerComponentInTableOrder(t *testing.T) {
	a := payload.Manifest{inputs.Release: "sha256:1", inputs.Renderer: "sha256:2", inputs.Proxy: "sha256:3"}
	b := payload.Manifest{inputs.Release: "sha256:1", inputs.Renderer: "sha256:9", inputs.APIServerProxy: "sha256:4"}
	got := payload.Diff(a, b)
	want := []payload.Change{
		{Component: inputs.Proxy, From: "sha256:3"},
		{Component: inputs.APIServerProxy, To: "sha256:4"},
		{Component: inputs.Renderer, From: "sha256:2", To: "sha256:9"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestManagementDriftLeavesOutOwnerIntent(t *testing.T) {
	running, _ := render(t, inputstest.New())
	w := inputstest.New()
	w.Pool.Spec.Release.Version = "v1.36.4"
	w.Settings.RendererVersion = "v0.2.0"
	w.PullSecret.Data[".dockerconfigjson"] = []byte(`{"auths":{}}`)
	latest, _ := render(t, w)
	if got := components(payload.ManagementDrift(running.Manifest, latest.Manifest)); got != "pull-secret,renderer" {
		t.Errorf("drift in %q, want pull-secret,renderer", got)
	}
}

func TestAnUncomposedPayloadHasTheHashComposeGives(t *testing.T) {
	p, _, err := payload.Render(inputstest.New().MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := payload.Uncomposed(p.Pool, p.Fragments).Hash; got != p.Hash {
		t.Fatalf("Uncomposed hash %s, Compose gave %s", got, p.Hash)
	}
	if payload.Uncomposed("other", p.Fragments).Hash == p.Hash {
		t.Fatal("the hash does not cover the pool name")
	}
}

func TestComposePinnedWithNothingPinnedIsLatest(t *testing.T) {
	p, _, err := payload.Render(inputstest.New().MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := payload.ComposePinned(p, p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := payload.Compose(p.Pool, p.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != again.Hash || string(got.Ignition) != string(again.Ignition) {
		t.Fatal("composing nothing pinned differs from composing the latest fragments")
	}
}

// Management drift alone composes nothing: the pinned payload is the
// running one, the same value, not a copy composed again.
func TestComposePinnedWithOnlyPinnedDriftIsRunning(t *testing.T) {
	running, _ := render(t, inputstest.New())
	w := inputstest.New()
	w.Management.Data["config"] = strings.Replace(w.Management.Data["config"], "sha256:aaaa", "sha256:bbbb", 1)
	latest, _ := render(t, w)
	if latest.Hash == running.Hash {
		t.Fatal("the management change changed nothing")
	}
	got, err := payload.ComposePinned(running, latest)
	if err != nil {
		t.Fatal(err)
	}
	if got != running {
		t.Fatalf("composed %s again instead of returning the running payload %s", payload.Short(got.Hash), payload.Short(running.Hash))
	}
	again, err := payload.Compose(running.Pool, running.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	if again.Hash != got.Hash || string(again.Ignition) != string(got.Ignition) {
		t.Fatal("the running payload differs from composing its fragments")
	}
}

// A composition of pinned and fresh components is composed once: the
// engine decides a pool with drift pending on every reconcile, and the
// second decision gets the same payload, not a second Ignition merge. The
// remembered payload is the one Compose gives for those fragments, and a
// pool of another name gets its own.
func TestComposePinnedComposesTheSameFragmentsOnce(t *testing.T) {
	running, _ := render(t, inputstest.New())
	w := inputstest.New()
	w.Management.Data["config"] += "metadataAddress: 169.254.169.253\n"
	w.PullSecret.Data[".dockerconfigjson"] = []byte(`{"auths":{"memo.example":{}}}`)
	latest, _ := render(t, w)

	first, err := payload.ComposePinned(running, latest)
	if err != nil {
		t.Fatal(err)
	}
	if first.Hash == running.Hash || first.Hash == latest.Hash {
		t.Fatal("the case composes nothing: it must pin one component and refresh another")
	}
	second, err := payload.ComposePinned(running, latest)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatal("the same fragments were composed again")
	}
	fresh, err := payload.Compose(first.Pool, first.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Hash != first.Hash || !bytes.Equal(fresh.Ignition, first.Ignition) {
		t.Fatal("the remembered payload differs from composing its fragments")
	}

	other := inputstest.New()
	other.Pool.Name = "other"
	otherRunning, _ := render(t, other)
	otherLatestW := inputstest.New()
	otherLatestW.Pool.Name = "other"
	otherLatestW.Management.Data["config"] += "metadataAddress: 169.254.169.253\n"
	otherLatestW.PullSecret.Data[".dockerconfigjson"] = []byte(`{"auths":{"memo.example":{}}}`)
	otherLatest, _ := render(t, otherLatestW)
	theirs, err := payload.ComposePinned(otherRunning, otherLatest)
	if err != nil {
		t.Fatal(err)
	}
	if theirs.Pool != "other" || theirs.Hash == first.Hash {
		t.Fatalf("pool other got pool %q's payload", first.Pool)
	}
}
