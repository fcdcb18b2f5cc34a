package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
)

// engineSettings are the controller's defaults: they only time token
// rotation and cleanup, which no prediction reports.
var engineSettings = rollout.Settings{TokenTTL: 4 * time.Hour, CleanupGracePeriod: 10 * time.Minute}

// decision is what the controller would decide for a pool now: the
// engine's input, observed as the controller observes (internal/observe),
// and its plan.
type decision struct {
	In      rollout.Input
	Plan    rollout.Plan
	Objects *observe.Objects
	// Warnings say where the prediction may differ from the controller's.
	Warnings []string
}

// decide observes the pool through live (MachineDeployment, MachineSets,
// Machines, the pool's Secrets), gathers its inputs through sources (live,
// or live with edited objects laid over it), renders the latest payload with
// the controller's settings as read back from the pool's payloads, and asks
// the engine for the plan. Nodes are not read: they change no decision.
func (o *Options) decide(ctx context.Context, live, sources client.Reader, pool *nodepoolv1.NodePool) (*decision, error) {
	d := &decision{In: rollout.Input{Pool: pool, Now: o.now(), Settings: engineSettings}}
	objs, err := observe.Read(ctx, live, pool, &d.In, logr.Discard())
	if err != nil {
		return nil, fmt.Errorf("observing NodePool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	d.Objects = objs
	settings, warnings, err := o.controllerSettings(ctx, live, pool, objs, d.In)
	if err != nil {
		return nil, err
	}
	d.Warnings = warnings
	if _, err := observe.Latest(ctx, sources, pool, settings, &d.In); err != nil {
		return nil, fmt.Errorf("NodePool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	d.Plan = rollout.Decide(d.In)
	return d, nil
}

// storedPayload is a payload read back from its Secret.
type storedPayload struct {
	p       *payload.Payload
	created time.Time
}

// controllerSettings reads back the controller's settings (payload server
// URL and CA, renderer version) from the payloads it stored: for each of
// the two components, from the newest payload whose digest is the one the
// controller's latest payload has as far as the pool's status tells
// (expectedManifest). A pool with no payload yet takes them from the newest
// payload of its namespace; with none anywhere, a stand-in is used and the
// payload hash cannot be the controller's (the rollout hash still is).
func (o *Options) controllerSettings(ctx context.Context, live client.Reader, pool *nodepoolv1.NodePool, objs *observe.Objects, in rollout.Input) (inputs.Settings, []string, error) {
	mc, err := o.managementConfigKey()
	if err != nil {
		return inputs.Settings{}, nil, err
	}
	var all []storedPayload
	for hash, p := range in.Payloads {
		all = append(all, storedPayload{p, objs.Payloads[hash].CreationTimestamp.Time})
	}
	if len(all) == 0 {
		if all, err = namespacePayloads(ctx, live, pool.Namespace); err != nil {
			return inputs.Settings{}, nil, err
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if !all[i].created.Equal(all[j].created) {
			return all[i].created.After(all[j].created)
		}
		return all[i].p.Hash < all[j].p.Hash
	})
	var readable []storedPayload
	settings := map[string]inputs.Settings{}
	for _, s := range all {
		if st, err := payload.SettingsOf(s.p); err == nil {
			readable = append(readable, s)
			settings[s.p.Hash] = st
		}
	}
	if len(readable) == 0 {
		ca, err := standInCA()
		if err != nil {
			return inputs.Settings{}, nil, err
		}
		return inputs.Settings{ManagementConfig: mc, PayloadServerURL: unknownPayloadServer, PayloadServerCA: ca, RendererVersion: "unknown"},
			[]string{"no payload is stored yet in namespace " + pool.Namespace + ", so the controller's payload server and renderer version are unknown: the payload hash shown is not the controller's (the rollout hash is)"}, nil
	}
	want := expectedManifest(pool, in)
	var warnings []string
	pick := func(c inputs.Component) inputs.Settings {
		for _, s := range readable {
			if want == nil || s.p.Manifest[c] == want[c] {
				return settings[s.p.Hash]
			}
		}
		warnings = append(warnings, fmt.Sprintf("no stored payload of %s has the %s component the controller reports (%s): assuming the newest one's, so the payload hash and the %s row may differ from the controller's",
			pool.Name, c, shortDigest(want[c]), c))
		return settings[readable[0].p.Hash]
	}
	server, renderer := pick(inputs.PayloadServer), pick(inputs.Renderer)
	return inputs.Settings{ManagementConfig: mc, PayloadServerURL: server.PayloadServerURL, PayloadServerCA: server.PayloadServerCA, RendererVersion: renderer.RendererVersion}, warnings, nil
}

// expectedManifest is the controller's latest payload as far as its
// status tells: the payload its target started with, with the digests of
// status.pendingManagementChanges. Nil when nothing is stored yet.
func expectedManifest(pool *nodepoolv1.NodePool, in rollout.Input) payload.Manifest {
	if in.MachineDeployment == nil {
		return nil
	}
	ud, ok := in.UserData[in.MachineDeployment.DataSecretName]
	if !ok {
		return nil
	}
	base, ok := in.Payloads[ud.PayloadHash]
	if !ok {
		return nil
	}
	m := payload.Manifest{}
	for c, d := range base.Manifest {
		m[c] = d
	}
	for _, r := range pool.Status.PendingManagementChanges {
		if c, err := inputs.ParseComponent(r.Component); err == nil {
			m[c] = r.Desired
		}
	}
	return m
}

// namespacePayloads reads the payload Secrets of every pool of a namespace.
func namespacePayloads(ctx context.Context, c client.Reader, namespace string) ([]storedPayload, error) {
	pools := &nodepoolv1.NodePoolList{}
	if err := c.List(ctx, pools, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing NodePools in %s: %w", namespace, err)
	}
	var out []storedPayload
	for i := range pools.Items {
		in := rollout.Input{}
		objs, err := observe.Read(ctx, c, &pools.Items[i], &in, logr.Discard())
		if err != nil {
			return nil, err
		}
		for hash, p := range in.Payloads {
			out = append(out, storedPayload{p, objs.Payloads[hash].CreationTimestamp.Time})
		}
	}
	return out, nil
}

// unknownPayloadServer stands in for the controller's payload server URL
// when no payload tells it.
const unknownPayloadServer = "https://payload-server.unknown.invalid/ignition"

var standIn struct {
	once sync.Once
	pem  []byte
	err  error
}

// standInCA is a throwaway CA certificate that stands in for the payload
// server's when no payload tells it: inputs.Gather wants a valid one.
func standInCA() ([]byte, error) {
	standIn.once.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			standIn.err = err
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubectl-nodepool stand-in CA"},
			NotBefore: time.Unix(0, 0), NotAfter: time.Unix(0, 0).Add(100 * 365 * 24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			standIn.err = err
			return
		}
		standIn.pem = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	return standIn.pem, standIn.err
}
