package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/gather"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// countingReader counts the Gets that reach the API server.
type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func cacheResults() (hit, shared, miss float64) {
	return testutil.ToFloat64(renderCacheResults.WithLabelValues("hit")), testutil.ToFloat64(renderCacheResults.WithLabelValues("shared")),
		testutil.ToFloat64(renderCacheResults.WithLabelValues("miss"))
}

// TestRenderCacheNeverServesAChangedInput renders a pool's payload through
// the cache after each kind of edit and compares it with a render from
// scratch: an unchanged pool is not rendered again, a changed input always is.
func TestRenderCacheNeverServesAChangedInput(t *testing.T) {
	ctx := context.Background()
	w := inputstest.New()
	c := w.Client().(client.Client)
	api := &countingReader{Reader: c}
	rc, err := newRenderCache(newInputReader(c, c, api, 16), w.Settings, 16)
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Settings: Settings{Inputs: w.Settings}, renders: rc}

	// check renders pool through the cache and from scratch, and fails
	// when they differ.
	check := func(what string, pool *nodepoolv1.NodePool, payloads map[string]bool) rollout.Input {
		t.Helper()
		fresh := &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), fresh); err != nil {
			t.Fatal(err)
		}
		var want rollout.Input
		if _, err := observe.Latest(ctx, c, fresh, w.Settings, &want); err != nil || want.RenderErr != nil {
			t.Fatalf("%s: rendering from scratch: %v %v", what, err, want.RenderErr)
		}
		var got rollout.Input
		if _, err := r.latest(ctx, fresh, &got); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		// The stored payloads, as the pool's Secrets would give them.
		got.Payloads = map[string]*payload.Payload{}
		if payloads[want.Hashes.Payload] {
			got.Payloads[want.Hashes.Payload] = want.Latest
		}
		if err := r.fitsInASecret(fresh, &got); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.RenderErr != nil || got.Latest == nil {
			t.Fatalf("%s: no latest payload: %v", what, got.RenderErr)
		}
		// An uncomposed payload (shared fragments) is what it composes to.
		served, err := got.Latest.Composed()
		if err != nil {
			t.Fatalf("%s: the served payload does not compose: %v", what, err)
		}
		if got.Hashes != want.Hashes || got.TemplateName != want.TemplateName || got.Latest.Hash != want.Latest.Hash ||
			string(served.Ignition) != string(want.Latest.Ignition) {
			t.Fatalf("%s: the cache served %+v (template %s), a render gives %+v (template %s)", what, got.Hashes, got.TemplateName, want.Hashes, want.TemplateName)
		}
		return got
	}
	pool := w.Pool
	h0, _, m0 := cacheResults()
	first := check("first reconcile", pool, nil)
	if _, _, m := cacheResults(); m != m0+1 {
		t.Fatalf("the first reconcile was not rendered")
	}
	gets := api.gets.Load()
	check("unchanged, payload not stored yet", pool, nil)
	check("unchanged, payload stored", pool, map[string]bool{first.Hashes.Payload: true})
	if h, _, m := cacheResults(); h != h0+2 || m != m0+1 {
		t.Fatalf("an unchanged pool was rendered again (hits %v, misses %v)", h-h0, m-m0)
	}
	if n := api.gets.Load() - gets; n != 0 {
		t.Fatalf("an unchanged pool read the API server %d times", n)
	}

	edit := func(obj client.Object, change func()) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		change()
		if err := c.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	last := first.Hashes
	changed := func(what string) {
		t.Helper()
		_, _, m := cacheResults()
		got := check(what, pool, nil)
		if got.Hashes.Payload == last.Payload && got.TemplateName == first.TemplateName {
			t.Fatalf("%s: nothing changed", what)
		}
		if _, _, m2 := cacheResults(); m2 != m+1 {
			t.Fatalf("%s: not rendered again", what)
		}
		last = got.Hashes
	}
	chrony := &corev1.ConfigMap{}
	chrony.Namespace, chrony.Name = inputstest.Namespace, "chrony"
	edit(chrony, func() {
		chrony.Data[inputs.ConfigKey] = inputstest.ChronyConfig + "# edited\n" + "passwd: {users: [{name: ops}]}\n"
	})
	changed("a user config edit")
	mc := &corev1.ConfigMap{}
	mc.Namespace, mc.Name = inputs.DefaultManagementConfig.Namespace, inputs.DefaultManagementConfig.Name
	edit(mc, func() {
		mc.Data[inputs.ManagementConfigKey] = "apiServerProxyImage: registry.example/haproxy@sha256:" + strings.Repeat("b", 64) + "\n"
	})
	changed("a management bump")
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(w.Template.GroupVersionKind())
	tmpl.SetNamespace(inputstest.Namespace)
	tmpl.SetName("small")
	edit(tmpl, func() { _ = unstructured.SetNestedField(tmpl.Object, "8Gi", "spec", "template", "spec", "memory") })
	before := last
	got := check("a template edit", pool, nil)
	if got.TemplateName == first.TemplateName || got.Hashes == before {
		t.Fatalf("a template edit was served from the cache")
	}
	edit(pool, func() { pool.Spec.Release.Version = "v1.36.4" })
	changed("a spec edit")
	cluster := w.Cluster.DeepCopy()
	edit(cluster, func() { cluster.Spec.ControlPlaneEndpoint.Host = "api2.prod-1.example" })
	changed("a Cluster endpoint edit")

	// A second pool of the same spec composes from the first's render.
	second := pool.DeepCopy()
	second.Name, second.ResourceVersion = "workers-b", ""
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	_, s1, _ := cacheResults()
	check("a second pool", second, nil)
	if _, s, _ := cacheResults(); s != s1+1 {
		t.Fatalf("a new pool of a spec seen before rendered its inputs again")
	}
	edit(mc, func() {
		mc.Data[inputs.ManagementConfigKey] = "apiServerProxyImage: registry.example/haproxy@sha256:" + strings.Repeat("c", 64) + "\n"
	})
	check("the bump, first pool", pool, nil)
	_, s0, _ := cacheResults()
	check("the bump, second pool", second, nil)
	if _, s, _ := cacheResults(); s != s0+1 {
		t.Fatalf("the second pool rendered the inputs the first had rendered")
	}
}

// TestASharedPayloadIsComposedOnlyToBeStoredOrWhenItMayNotFit: a pool
// whose inputs another pool rendered gets its latest payload uncomposed
// (no merge, no encoding) while its sibling's payload Secret fits with room
// to spare; near the limit its own Secret is encoded and measured.
func TestASharedPayloadIsComposedOnlyToBeStoredOrWhenItMayNotFit(t *testing.T) {
	ctx := context.Background()
	w := inputstest.New()
	c := w.Client().(client.Client)
	rc, err := newRenderCache(newInputReader(c, c, c, 16), w.Settings, 16)
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Settings: Settings{Inputs: w.Settings}, renders: rc}
	reconcile := func(pool *nodepoolv1.NodePool) *rollout.Input {
		t.Helper()
		in := &rollout.Input{Payloads: map[string]*payload.Payload{}}
		if _, err := r.latest(ctx, pool, in); err != nil {
			t.Fatal(err)
		}
		if err := r.fitsInASecret(pool, in); err != nil || in.Latest == nil {
			t.Fatalf("no latest payload: %v", err)
		}
		return in
	}
	first := reconcile(w.Pool)
	if first.Latest.Ignition == nil {
		t.Fatal("the pool that rendered has no composed payload")
	}
	second := w.Pool.DeepCopy()
	second.Name, second.ResourceVersion = "workers-b", ""
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	composed := testutil.ToFloat64(renderCacheResults.WithLabelValues("composed"))
	in := reconcile(second)
	if in.Latest.Ignition != nil || testutil.ToFloat64(renderCacheResults.WithLabelValues("composed")) != composed {
		t.Fatal("a shared payload that fits with room to spare was composed")
	}
	if _, ok := rc.encoded.Load(client.ObjectKeyFromObject(second)); ok {
		t.Fatal("a shared payload that fits with room to spare was encoded")
	}
	// What the plan stores is composed then, to the hash it was known by.
	s, err := r.payloadSecret(second, in.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if s.Annotations[secrets.AnnotationPayloadHash] != in.Latest.Hash {
		t.Fatalf("stored as %q, known as %s", s.Annotations[secrets.AnnotationPayloadHash], in.Latest.Hash)
	}

	// The sibling's Secret was near the limit: this pool's is measured.
	e, _ := rc.pools.get(client.ObjectKeyFromObject(second))
	e.shared.record(payloadSize{data: payloadDataLimit - fitMargin/2})
	e.latest = nil
	in = reconcile(second)
	if in.Latest.Ignition == nil {
		t.Fatal("a shared payload that may not fit was not composed")
	}
	// Measured by its bound (this one is a few KiB: nothing to compress),
	// which the pools sharing its fragments go by from now on.
	if !e.shared.fits() {
		t.Fatal("a shared payload that may not fit was not measured")
	}
}

// TestAPayloadFarBelowTheLimitIsNotCompressedToBeKnownToFit: a rendered
// payload whose Secret could not reach the limit whatever gzip makes of
// it is known to fit without being encoded (it is compressed only when
// written); one whose bound reaches the limit is encoded and measured, and
// refused when its Secret would not fit.
func TestAPayloadFarBelowTheLimitIsNotCompressedToBeKnownToFit(t *testing.T) {
	ctx := context.Background()
	fits := func(w *inputstest.World) (*rollout.Input, *renderCache, error) {
		t.Helper()
		c := w.Client().(client.Client)
		rc, err := newRenderCache(newInputReader(c, c, c, 16), w.Settings, 16)
		if err != nil {
			t.Fatal(err)
		}
		r := &Reconciler{Settings: Settings{Inputs: w.Settings}, renders: rc}
		in := &rollout.Input{Payloads: map[string]*payload.Payload{}}
		if _, err := r.latest(ctx, w.Pool, in); err != nil || in.Latest == nil {
			t.Fatalf("no latest payload: %v %v", err, in.RenderErr)
		}
		return in, rc, r.fitsInASecret(w.Pool, in)
	}

	w := inputstest.New()
	in, rc, err := fits(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.encoded.Load(client.ObjectKeyFromObject(w.Pool)); ok {
		t.Fatal("a payload of a few KiB was compressed to learn that it fits")
	}
	e, _ := rc.pools.get(client.ObjectKeyFromObject(w.Pool))
	if e == nil || !e.shared.fits() {
		t.Fatal("the pools sharing the payload's fragments do not know that it fits")
	}
	r := &Reconciler{renders: rc}
	s, err := r.payloadSecret(w.Pool, in.Latest)
	if err != nil || s.Annotations[secrets.AnnotationPayloadHash] != in.Latest.Hash {
		t.Fatalf("the payload Secret written later: %v", err)
	}

	// Random text in ConfigMaps of 600 KiB each: one is past the bound's
	// limit but fits once compressed (encoded and measured); three are
	// past the limit compressed (refused).
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(62)]
		}
		return string(b)
	}
	big := func(configs int) *inputstest.World {
		w := inputstest.New()
		for i := range configs {
			name := fmt.Sprintf("noise-%d", i)
			w.UserConfigs = append(w.UserConfigs, inputstest.ConfigMap(name,
				fmt.Sprintf(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/noise/%d","mode":420,"contents":{"source":"data:,%s"}}]}}`, i, noise(600<<10))))
			w.Pool.Spec.Config = append(w.Pool.Spec.Config, nodepoolv1.LocalObjectReference{Name: name})
		}
		return w
	}
	w = big(1)
	if _, rc, err = fits(w); err != nil {
		t.Fatalf("a payload gzip brings under the limit was refused: %v", err)
	}
	if _, ok := rc.encoded.Load(client.ObjectKeyFromObject(w.Pool)); !ok {
		t.Fatal("a payload whose bound is past the limit was not encoded and measured")
	}
	w = big(3)
	var tooLarge *rollout.PayloadTooLargeError
	if _, _, err = fits(w); !errors.As(err, &tooLarge) {
		t.Fatalf("a payload past the limit once compressed: %v, want PayloadTooLargeError", err)
	}
}

// listCounter counts the lists of unstructured objects (a template's
// clones) that reach its reader.
type listCounter struct {
	client.Reader
	lists atomic.Int64
}

func (c *listCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*unstructured.UnstructuredList); ok {
		c.lists.Add(1)
	}
	return c.Reader.List(ctx, list, opts...)
}

// TestATemplatesClonesAreListedOnlyUntilOneIsFoundPinned: every pool of a
// template has a clone of it, so a list of the clones at each gather costs
// what the pools of the template do. The clone found pinned is remembered
// and read alone while it lasts; the spec read is the one a list gives,
// and once that clone is gone the clones are listed again.
func TestATemplatesClonesAreListedOnlyUntilOneIsFoundPinned(t *testing.T) {
	ctx := context.Background()
	w := inputstest.New()
	w.Template.SetUID("tmpl-uid")
	w.Template.SetGeneration(3)
	was := []byte(`{"template":{"spec":{"cpus":2}}}`)
	owner := metav1.OwnerReference{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: "workers", UID: "pool-uid", Controller: new(true)}
	clone := func(name string, created time.Time) *unstructured.Unstructured {
		c := &unstructured.Unstructured{}
		c.SetGroupVersionKind(w.Template.GroupVersionKind())
		c.SetNamespace(w.Template.GetNamespace())
		c.SetName(name + "-" + inputs.TemplateInput{Spec: was}.Hash()[:16])
		c.SetCreationTimestamp(metav1.NewTime(created))
		c.SetLabels(map[string]string{nodepoolv1.LabelTemplateSourceUID: "tmpl-uid", nodepoolv1.LabelTemplateSourceGeneration: "3"})
		c.SetAnnotations(map[string]string{nodepoolv1.AnnotationTemplateSourceSpec: string(was)})
		c.SetOwnerReferences([]metav1.OwnerReference{owner})
		c.Object["spec"] = map[string]any{}
		return c
	}
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for i := range 50 {
		w.Extra = append(w.Extra, clone(fmt.Sprintf("pool-%02d", i), t0.Add(time.Duration(i)*time.Minute)))
	}
	c := w.Client().(client.Client)
	counter := &listCounter{Reader: c}
	reader := newInputReader(c, counter, c, 16)
	gatherSpec := func(what string) []byte {
		t.Helper()
		got, err := gather.Gather(ctx, &recorder{inputReader: reader}, w.Pool, w.Settings)
		if err != nil {
			t.Fatal(err)
		}
		want, err := gather.Gather(ctx, c, w.Pool, w.Settings)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.InfrastructureTemplate.Spec) != string(want.InfrastructureTemplate.Spec) || !got.InfrastructureTemplate.Pinned {
			t.Fatalf("%s: read %s (pinned %v), a list of the clones gives %s", what, got.InfrastructureTemplate.Spec, got.InfrastructureTemplate.Pinned, want.InfrastructureTemplate.Spec)
		}
		return got.InfrastructureTemplate.Spec
	}
	gatherSpec("the first gather")
	if n := counter.lists.Load(); n != 1 {
		t.Fatalf("the first gather listed the clones %d times, want 1", n)
	}
	for range 5 {
		gatherSpec("a later gather")
	}
	if n := counter.lists.Load(); n != 1 {
		t.Fatalf("later gathers listed the clones again (%d lists in all)", n)
	}
	// The oldest clone is cleaned up: the clones are listed once more.
	if err := c.Delete(ctx, w.Extra[0]); err != nil {
		t.Fatal(err)
	}
	gatherSpec("after the pinned clone went")
	gatherSpec("and once more")
	if n := counter.lists.Load(); n != 2 {
		t.Fatalf("%d lists of the clones in all, want 2 (one after the pinned clone went)", n)
	}
}
