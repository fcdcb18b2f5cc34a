package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/settings"
)

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

// controller is what the CLI knows of the controller: the settings it
// published (internal/settings).
type controller struct {
	inputs inputs.Settings
	engine rollout.Settings
}

// controllerSettings reads the settings the controller published in
// --controller-namespace, once per command.
func (o *Options) controllerSettings(ctx context.Context, c client.Reader) (*controller, error) {
	if o.published != nil {
		return o.published, nil
	}
	key := types.NamespacedName{Namespace: o.ControllerNamespace, Name: settings.ConfigMapName}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unreachableError(fmt.Errorf("the controller's settings ConfigMap %s is not there: the controller publishes it when it starts (is it running, and in namespace %s? set --controller-namespace)", key, o.ControllerNamespace))
		}
		return nil, fmt.Errorf("reading the controller's settings ConfigMap %s: %w", key, err)
	}
	p, err := settings.Decode(cm)
	if err != nil {
		return nil, err
	}
	ns, name, ok := strings.Cut(p.ManagementConfig, "/")
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s key %s: %q is not <namespace>/<name>", key, settings.KeyManagementConfig, p.ManagementConfig)
	}
	o.published = &controller{
		inputs: inputs.Settings{ManagementConfig: types.NamespacedName{Namespace: ns, Name: name}, PayloadServerURL: p.PayloadServerURL,
			PayloadServerCA: []byte(p.PayloadServerCA), RendererVersion: p.RendererVersion},
		engine: rollout.Settings{TokenTTL: p.TokenTTL, CleanupGracePeriod: p.CleanupGracePeriod, NodeAgentTimeout: p.NodeAgentTimeout, ResyncPeriod: p.ResyncPeriod},
	}
	return o.published, nil
}

// decide observes the pool through live (MachineDeployment, MachineSets,
// Machines, the pool's Secrets), gathers its inputs through sources (live,
// or live with edited objects laid over it), renders the latest payload with
// the controller's published settings, and asks the engine for the plan.
// Nodes are not read: an InPlace pool's node updates are the controller's
// business, and no prediction reports them.
func (o *Options) decide(ctx context.Context, live, sources client.Reader, pool *nodepoolv1.NodePool) (*decision, error) {
	return o.decideAt(ctx, live, sources, pool, o.now())
}

// decideAt is decide for the time now, such as the time a request takes
// effect.
func (o *Options) decideAt(ctx context.Context, live, sources client.Reader, pool *nodepoolv1.NodePool, now time.Time) (*decision, error) {
	ctl, err := o.controllerSettings(ctx, live)
	if err != nil {
		return nil, err
	}
	d := &decision{In: rollout.Input{Pool: pool, Now: now, Settings: ctl.engine}}
	objs, err := observe.Read(ctx, live, pool, &d.In, logr.Discard())
	if err != nil {
		return nil, fmt.Errorf("observing NodePool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	d.Objects = objs
	if _, err := observe.Latest(ctx, sources, pool, ctl.inputs, &d.In); err != nil {
		return nil, fmt.Errorf("NodePool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	d.In.Machines = observe.MachineHealth(pool, objs.MachineSets, objs.Machines, nil) // the health gate's view, without Nodes
	d.In.Drains = observe.Drains(objs.Machines, d.In.MachineDeployment)
	d.Plan = rollout.Decide(d.In)
	return d, nil
}
