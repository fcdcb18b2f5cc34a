package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// renderCache makes a reconcile's work proportional to what changed:
//
//   - per pool, it keeps what the pool's inputs were read from (each object
//     with its resourceVersion) and what they gave (the gathered inputs,
//     hashes and template clone name). A reconcile whose pool spec,
//     controller settings and every such object's version (as the cache
//     holds them) are unchanged neither gathers, renders nor hashes;
//   - across pools, keyed by a digest of those versions, the pool spec and
//     namespace, it keeps the gathered inputs and the rendered fragments:
//     pools with the same inputs (a management bump seen by every pool)
//     read, parse and render them once; each pool only composes its own
//     payload (the payload carries the pool's name);
//   - a pool's payload body is kept only until its payload Secret is seen:
//     then the stored one, decoded from the pool's Secret, serves.
//
// A changed object always has a new resourceVersion, so an edit is never
// served from the cache.
type renderCache struct {
	reader   *inputReader
	settings string
	pools    *lru[client.ObjectKey, *poolRender]
	shared   *lru[string, *sharedRender]
	// plans are the objects the last gather of a spec read, by spec key:
	// a new pool of a spec seen before finds another pool's render.
	plans *lru[string, []read]
	// resolving hands a pool's cached entry from latest to fitsInASecret
	// within one reconcile (a pool is never reconciled twice at once).
	resolving sync.Map // client.ObjectKey -> *poolRender
	// encoded is the payload Secret fitsInASecret encoded, for
	// storePayload to write without encoding it again.
	encoded sync.Map // client.ObjectKey -> *corev1.Secret
}

type poolRender struct {
	spec         string
	reads        []read
	gathered     *inputs.Inputs
	hashes       payload.Hashes
	templateName string

	// shared is the render of the pool's inputs, whose fragments (shared
	// with other pools) make the payload when it is not stored; nil means
	// render gathered again.
	shared *sharedRender

	mu     sync.Mutex
	latest *payload.Payload // nil once its payload Secret is stored
}

type sharedRender struct {
	gathered  inputs.Inputs // Pool is the namespace only
	fragments map[inputs.Component][]byte
	manifest  payload.Manifest
	hashes    payload.Hashes // without the payload hash

	mu sync.Mutex
	// fit is the size of one pool's payload Secret of these fragments,
	// once a pool's was encoded (nil before): the pools sharing them
	// differ only in their name and hash, a few hundred bytes at most.
	fit *payloadSize
}

// payloadSize is the size of a payload Secret, encoded or bounded
// (payloadFits).
type payloadSize struct{ data, inflated int }

// fitMargin is how much larger than another pool's payload Secret of the
// same fragments a pool's may be: its name (up to 63 characters) and hash
// appear in the identity fragment a handful of times.
const fitMargin = 4 << 10

func newRenderCache(reader *inputReader, s inputs.Settings, pools int) (*renderCache, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return &renderCache{reader: reader, settings: digestOf(b), pools: newLRU[client.ObjectKey, *poolRender](pools),
		shared: newLRU[string, *sharedRender](max(pools/8, 64)), plans: newLRU[string, []read](max(pools/8, 64))}, nil
}

func digestOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d\n", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// specKey covers what of the pool inputs.Gather reads besides objects:
// its namespace and spec, and the controller settings.
func (c *renderCache) specKey(pool *nodepoolv1.NodePool) string {
	b, _ := json.Marshal(&pool.Spec)
	return digestOf([]byte(c.settings), []byte(pool.Namespace), b)
}

func sharedKey(spec string, reads []read) string {
	parts := [][]byte{[]byte(spec)}
	for _, r := range reads {
		parts = append(parts, []byte(r.typ.String()+" "+r.gvk.String()+" "+r.key.String()+" "+r.version))
	}
	return digestOf(parts...)
}

// latest is observe.Latest through the render cache: it fills in.Latest
// (or leaves it for fitsInASecret to resolve from the stored payload),
// in.Hashes, in.TemplateName and in.RenderErr.
func (r *Reconciler) latest(ctx context.Context, pool *nodepoolv1.NodePool, in *rollout.Input) (*inputs.Inputs, error) {
	c := r.renders
	if c == nil {
		return observe.Latest(ctx, r.APIReader, pool, r.Settings.Inputs, in)
	}
	key := client.ObjectKeyFromObject(pool)
	c.resolving.Delete(key)
	spec := c.specKey(pool)
	e, ok := c.pools.get(key)
	reads := []read(nil)
	if ok && e.spec == spec {
		reads = e.reads
	} else if plan, ok := c.plans.get(spec); ok {
		e, reads = nil, plan
	}
	if reads != nil {
		now, same, err := c.versions(ctx, reads)
		if err != nil {
			return nil, err
		}
		if same && e != nil {
			renderCacheResults.WithLabelValues("hit").Inc()
			return c.serve(key, e, in), nil
		}
		if sh, ok := c.shared.get(sharedKey(spec, now)); ok {
			if e, ok := c.compose(pool, spec, now, sh); ok {
				renderCacheResults.WithLabelValues("shared").Inc()
				c.pools.put(key, e)
				return c.serve(key, e, in), nil
			}
		}
	}
	renderCacheResults.WithLabelValues("miss").Inc()
	rec := &recorder{inputReader: c.reader}
	gathered, err := observe.Latest(ctx, rec, pool, r.Settings.Inputs, in)
	if err != nil || gathered == nil || in.Latest == nil {
		c.pools.remove(key)
		return gathered, err
	}
	sh := &sharedRender{gathered: *gathered, fragments: in.Latest.Fragments, manifest: in.Latest.Manifest, hashes: in.Hashes}
	sh.gathered.Pool.Name, sh.hashes.Payload = "", ""
	e = &poolRender{spec: spec, reads: rec.reads, gathered: gathered, hashes: in.Hashes, templateName: in.TemplateName, latest: in.Latest, shared: sh}
	c.pools.put(key, e)
	c.shared.put(sharedKey(spec, rec.reads), sh)
	c.plans.put(spec, rec.reads)
	return gathered, nil
}

// versions reads the cache's version of each of reads, and reports
// whether every one is unchanged.
func (c *renderCache) versions(ctx context.Context, reads []read) ([]read, bool, error) {
	now := make([]read, len(reads))
	same := true
	for i, rd := range reads {
		v, err := c.reader.current(ctx, rd)
		if err != nil {
			return nil, false, err
		}
		now[i] = rd
		now[i].version = v
		same = same && v == rd.version
	}
	return now, same, nil
}

// compose makes a pool's entry from inputs another pool gathered and
// rendered. Only the pool's payload hash is computed: the payload itself
// is composed (resolve) only when the pool has not stored it yet.
func (c *renderCache) compose(pool *nodepoolv1.NodePool, spec string, reads []read, sh *sharedRender) (*poolRender, bool) {
	for _, rd := range reads {
		if rd.version == "" {
			return nil, false
		}
	}
	gathered := sh.gathered
	gathered.Pool = client.ObjectKeyFromObject(pool)
	h := sh.hashes
	latest := sh.uncomposed(pool.Name)
	h.Payload = latest.Hash
	return &poolRender{spec: spec, reads: reads, gathered: &gathered, hashes: h, shared: sh,
		templateName: payload.InfrastructureTemplateName(pool.Name, payload.TemplateHash(gathered.InfrastructureTemplate))}, true
}

func (c *renderCache) serve(key client.ObjectKey, e *poolRender, in *rollout.Input) *inputs.Inputs {
	in.Hashes, in.TemplateName, in.RenderErr = e.hashes, e.templateName, nil
	e.mu.Lock()
	in.Latest = e.latest
	e.mu.Unlock()
	if in.Latest == nil {
		c.resolving.Store(key, e)
	}
	return e.gathered
}

// resolve fills in.Latest of a cache hit once the pool's payload Secrets
// are read: the stored payload of the latest hash, or, when it is not
// stored (any more), the payload of the shared fragments, uncomposed
// (storePayload composes it if the plan stores it), or rendered again.
func (c *renderCache) resolve(pool *nodepoolv1.NodePool, in *rollout.Input) {
	key := client.ObjectKeyFromObject(pool)
	v, ok := c.resolving.LoadAndDelete(key)
	if !ok {
		if in.Latest != nil {
			if _, stored := in.Payloads[in.Latest.Hash]; stored {
				if e, ok := c.pools.get(key); ok {
					e.mu.Lock()
					if e.latest == in.Latest {
						e.latest = nil // served from the pool's Secret from now on
					}
					e.mu.Unlock()
				}
			}
		}
		return
	}
	e := v.(*poolRender)
	if p, stored := in.Payloads[e.hashes.Payload]; stored {
		in.Latest = p
		return
	}
	var latest *payload.Payload
	var err error
	if e.shared != nil {
		latest = e.shared.uncomposed(pool.Name)
	} else {
		renderCacheResults.WithLabelValues("composed").Inc()
		latest, _, err = payload.Render(e.gathered)
	}
	if err == nil && latest.Hash != e.hashes.Payload {
		err = fmt.Errorf("payload %s rendered again as %s: this is a bug in nodepool", payload.Short(e.hashes.Payload), payload.Short(latest.Hash))
	}
	if err != nil {
		c.pools.remove(key)
		in.Latest, in.Hashes, in.RenderErr = nil, payload.Hashes{}, err
		return
	}
	e.mu.Lock()
	e.latest = latest
	e.mu.Unlock()
	in.Latest = latest
}

// fitsInASecret resolves a cache hit's latest payload, then checks that it
// fits in a payload Secret; the Secret encoded for that is kept for
// storePayload. An uncomposed latest payload whose fragments another
// pool's payload Secret held with room to spare fits without composing.
func (r *Reconciler) fitsInASecret(pool *nodepoolv1.NodePool, in *rollout.Input) error {
	if r.renders == nil {
		_, _, err := payloadFits(pool, in)
		return err
	}
	r.renders.resolve(pool, in)
	key := client.ObjectKeyFromObject(pool)
	r.renders.encoded.Delete(key)
	if in.Latest == nil {
		return nil
	}
	if _, stored := in.Payloads[in.Latest.Hash]; stored {
		return nil
	}
	var sh *sharedRender
	if e, ok := r.renders.pools.get(key); ok && e.hashes.Payload == in.Latest.Hash {
		sh = e.shared
	}
	if in.Latest.Ignition == nil && sh != nil && sh.fits() {
		return nil
	}
	full, err := composed(in.Latest)
	if err != nil {
		r.renders.pools.remove(key)
		in.Latest, in.Hashes = nil, payload.Hashes{}
		return err
	}
	in.Latest = full
	s, size, err := payloadFits(pool, in)
	if err == nil && s != nil {
		r.renders.encoded.Store(key, s)
	}
	if err == nil && size != nil && sh != nil {
		sh.record(*size)
	}
	return err
}

// composed is pl with its Ignition config, counted when it had none.
func composed(pl *payload.Payload) (*payload.Payload, error) {
	if pl.Ignition == nil {
		renderCacheResults.WithLabelValues("composed").Inc()
	}
	return pl.Composed()
}

// uncomposed is the payload of the shared fragments for a pool.
func (sh *sharedRender) uncomposed(pool string) *payload.Payload {
	return (&payload.Payload{Fragments: sh.fragments, Manifest: sh.manifest}).ForPool(pool)
}

func (sh *sharedRender) fits() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.fit != nil && sh.fit.data+fitMargin <= payloadDataLimit && sh.fit.inflated+fitMargin <= secrets.MaxInflatedBytes
}

func (sh *sharedRender) record(s payloadSize) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.fit = &s
}

// payloadSecret is the payload Secret of pl: the one fitsInASecret encoded
// in this reconcile, or a new encoding.
func (r *Reconciler) payloadSecret(pool *nodepoolv1.NodePool, pl *payload.Payload) (*corev1.Secret, error) {
	name := secrets.PayloadSecretName(pool.Name, pl.Hash)
	if r.renders != nil {
		if v, ok := r.renders.encoded.LoadAndDelete(client.ObjectKeyFromObject(pool)); ok && v.(*corev1.Secret).Name == name {
			return v.(*corev1.Secret), nil
		}
	}
	full, err := composed(pl)
	if err != nil {
		return nil, err
	}
	return secrets.NewPayloadSecret(pool.Namespace, name, secrets.FromPayload(full))
}

// renderCacheResults counts how reconciles found their pool's latest
// payload: hit (nothing read changed: no render), shared (from inputs
// another pool gathered and rendered), miss (gathered and rendered);
// composed counts the payloads composed later (a shared or hit whose
// payload was not stored).
var renderCacheResults = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodepool_render_cache_total",
	Help: "Reconciles by how their latest payload was found: hit (unchanged inputs, no render), shared (another pool's render of the same inputs), miss (rendered); composed: payloads composed for a hit or shared whose payload was not stored.",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(renderCacheResults) }
