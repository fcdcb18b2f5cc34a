package cli

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
)

// What a plan predicts for a pool (PlanResult.Rollout).
const (
	PlanCreate    = "create"    // a new pool: its machines are created
	PlanNow       = "now"       // a rollout starts as soon as the change is applied
	PlanNone      = "none"      // no machine is replaced
	PlanDeferred  = "deferred"  // a rollout waits for the pool's pause to end
	PlanScheduled = "scheduled" // a forced rollout waits for its time
	PlanInvalid   = "invalid"   // the inputs do not render: nothing changes on the nodes
	PlanRefused   = "refused"   // the API server refuses the edited NodePool
)

// PlanResult is what `plan` predicts for one pool.
type PlanResult struct {
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	// Rollout is create, now, none, deferred, scheduled, invalid or refused.
	Rollout string `json:"rollout"`
	// Rolls is true when the change replaces machines (now, or once the
	// pause or the scheduled time has come).
	Rolls bool `json:"rolls"`
	// Initiator is who the rollout is recorded for: spec, version,
	// restart, platform or policy.
	Initiator string `json:"initiator,omitempty"`
	// Changed are, when the change rolls the nodes, the payload components
	// in which what the machines would run differs from what they run now.
	Changed []PlanComponent `json:"changed,omitempty"`
	// Machines is how many machines are replaced (created, for a new pool;
	// updated in place, for an InPlace pool).
	Machines int32 `json:"machines"`
	// Steps is how many rounds of at most MaxSurge+MaxUnavailable machines
	// a RollingUpdate replaces them in.
	Steps          int32  `json:"steps"`
	Strategy       string `json:"strategy,omitempty"`
	MaxSurge       int32  `json:"maxSurge"`
	MaxUnavailable int32  `json:"maxUnavailable"`
	// InPlace lists spec changes applied without replacing a machine.
	InPlace []string `json:"inPlace,omitempty"`
	// PendingDrift lists the platform components the nodes would still
	// not run after the change (a rollout carries the drift it changes).
	PendingDrift []string `json:"pendingDrift,omitempty"`
	RolloutHash  string   `json:"rolloutHash,omitempty"`
	PayloadHash  string   `json:"payloadHash,omitempty"`
	// RollsAt is, for a rollout the maintenance windows hold, when it
	// starts (the next window); WaitsFor says why it waits.
	RollsAt  *time.Time `json:"rollsAt,omitempty"`
	WaitsFor string     `json:"waitsFor,omitempty"`
	// Window says whether the rollout fits its maintenance window, from
	// the pool's recent rollout durations.
	Window string `json:"window,omitempty"`
	// Health is how a health-gated rollout would go (plan_health.go).
	Health *PlanHealth `json:"health,omitempty"`
	// Message says it in a sentence.
	Message  string   `json:"message"`
	Warnings []string `json:"warnings,omitempty"`
	// Drains are the pods that will block or slow the drains of the
	// rollout, read from the workload cluster (plan_drain.go); DrainBlocks
	// is true when one blocks; DrainIgnored counts the DaemonSet and
	// static pods the drains skip.
	Drains       []PlanDrain `json:"drains,omitempty"`
	DrainBlocks  bool        `json:"drainBlocks,omitempty"`
	DrainIgnored int         `json:"drainIgnored,omitempty"`
	// DrainStall says what a drain predicted to block does to the
	// rollout, by the pool's drain policy (the engine's words).
	DrainStall string `json:"drainStall,omitempty"`
}

// PlanComponent is a payload component that changes.
type PlanComponent struct {
	Component string `json:"component"`
	// Class is rollout (owner intent) or management (platform).
	Class    string `json:"class"`
	Delivery string `json:"delivery,omitempty"`
}

func newPlanCommand(o *Options) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "plan -f FILE...",
		Short: "Predict whether an edit would replace a pool's nodes, without applying it",
		Long: `Predict, without applying anything, what the controller would do if the given
NodePool, ConfigMap, Secret, Cluster and infrastructure machine template
manifests were applied: whether nodes would roll
(now, after the pool's pause, at a scheduled time, or not at all), who the
rollout would be recorded for, which payload components change, how many
machines are replaced and in how many steps (maxSurge, maxUnavailable), what is
applied in place, and which platform changes stay pending.

plan asks the API server to validate and default the edited NodePool (a
server-side dry run: CEL rules and defaults apply, nothing is stored), gathers
the pool's inputs with the edited objects laid over the cluster's, renders the
payload and calls the controller's own rollout engine on what the controller
observes (its MachineDeployment, MachineSets, Machines and Secrets), with
the settings the controller published (ConfigMap nodepool-controller-settings
in --controller-namespace). Edited ConfigMaps, Secrets, Clusters and
templates alone plan every pool that reads them (a Cluster's
controlPlaneEndpoint, a template's spec; the management config: every pool
of the namespace, or of all namespaces with -A).

Exit status 1 when an edit is refused or its inputs are invalid.`,
		Example: `  # Will bumping the version of workers roll its nodes, and how?
  kubectl nodepool plan -f workers.yaml

  # Will this chrony config change roll the pools that use it?
  kubectl nodepool plan -f chrony-configmap.yaml -o json

  # Will moving the cluster's API endpoint, or a bigger machine template, roll nodes?
  kubectl nodepool plan -f cluster.yaml -f machine-template.yaml

  # What would a new API-server proxy image do to every pool?
  kubectl nodepool plan -A -f management-config.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("give the edited manifests with -f FILE (or -f - for standard input)")
			}
			return o.asAnswer(o.plan(cmd.Context(), files))
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifests of edited NodePools, ConfigMaps and Secrets (YAML or JSON; - for standard input)")
	return cmd
}

func (o *Options) plan(ctx context.Context, files []string) error {
	c, err := o.kubeClient()
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	m, err := readManifests(files, o.In, ns)
	if err != nil {
		return err
	}
	missing, err := o.missingForPrediction(ctx, ns)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &limitedError{fmt.Sprintf("plan cannot predict what the controller would do in namespace %s: it observes the pools as the controller does and renders their payloads with its settings; it needs %s. `kubectl apply --dry-run=server -f` still validates the edit, and after it is applied `kubectl nodepool rollout status` shows what the controller decided.",
			ns, missingWords(missing))}
	}
	ctl, err := o.controllerSettings(ctx, c)
	if err != nil {
		return err
	}
	mc := ctl.inputs.ManagementConfig
	sources := newOverlay(c)
	for _, obj := range m.objects {
		if err := sources.add(obj); err != nil {
			return err
		}
	}
	var results []PlanResult
	planned := map[types.NamespacedName]bool{}
	for _, edited := range m.pools {
		key := client.ObjectKeyFromObject(edited)
		if planned[key] {
			return fmt.Errorf("NodePool %s is given twice", key)
		}
		planned[key] = true
		r, err := o.planPool(ctx, c, sources, edited, nil)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	// Pools not given that read an edited ConfigMap or Secret.
	affected, err := o.poolsReading(ctx, c, m.objects, mc, ns)
	if err != nil {
		return err
	}
	for i := range affected {
		p := &affected[i]
		if planned[client.ObjectKeyFromObject(p)] {
			continue
		}
		planned[client.ObjectKeyFromObject(p)] = true
		r, err := o.planPool(ctx, c, sources, nil, p)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if len(results) == 0 {
		return fmt.Errorf("no NodePool reads the given objects: nothing to plan (give the NodePool with -f, or -n/-A for the pools of another namespace)")
	}
	if !o.tabular() {
		objs := make([]object, 0, len(results))
		for _, r := range results {
			objs = append(objs, poolObject(r.Pool))
		}
		if err := o.printStructured(results, objs...); err != nil {
			return err
		}
	} else if err := printPlan(o, results); err != nil {
		return err
	}
	for _, r := range results {
		if r.Rollout == PlanRefused || r.Rollout == PlanInvalid {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("NodePool %s/%s: %s", r.Namespace, r.Pool, r.Message)}
		}
	}
	for _, r := range results {
		if r.DrainBlocks {
			return &ExitError{Code: ExitDrainBlocked, Err: fmt.Errorf("NodePool %s/%s: a drain of the rollout is predicted to block", r.Namespace, r.Pool)}
		}
	}
	return nil
}

// poolsReading lists the pools that read one of objs: the management
// config is read by every pool (of ns, or of every namespace with -A).
func (o *Options) poolsReading(ctx context.Context, c client.Reader, objs []client.Object, mc types.NamespacedName, ns string) ([]nodepoolv1.NodePool, error) {
	var out []nodepoolv1.NodePool
	for _, obj := range objs {
		_, isCM := obj.(*corev1.ConfigMap)
		isMC := isCM && client.ObjectKeyFromObject(obj) == mc
		listNS := obj.GetNamespace()
		if isMC {
			listNS = ns
			if o.AllNamespaces {
				listNS = ""
			}
		}
		list := &nodepoolv1.NodePoolList{}
		if err := c.List(ctx, list, client.InNamespace(listNS)); err != nil {
			return nil, fmt.Errorf("listing the NodePools that read %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(obj), err)
		}
		for _, p := range list.Items {
			if isMC || inputs.References(&p, obj) {
				out = append(out, p)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

// planPool predicts for one pool: edited is the pool as given (nil when
// only its inputs were edited), live the pool in the cluster if known.
func (o *Options) planPool(ctx context.Context, c client.Client, sources client.Reader, edited, live *nodepoolv1.NodePool) (PlanResult, error) {
	if live == nil {
		live = &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(edited), live); err != nil {
			if !apierrors.IsNotFound(err) {
				return PlanResult{}, fmt.Errorf("reading NodePool %s: %w", client.ObjectKeyFromObject(edited), err)
			}
			live = nil
		}
	}
	ref := edited
	if ref == nil {
		ref = live
	}
	r := PlanResult{Namespace: ref.Namespace, Pool: ref.Name}
	pool := live
	if edited != nil {
		p, err := dryRun(ctx, c, edited, live)
		if err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) && !rbacDenied(err) {
				r.Rollout, r.Message = PlanRefused, "the API server refuses the edited NodePool: "+apiMessage(err)
				return r, nil
			}
			return r, err
		}
		pool = p
	}
	d, err := o.decide(ctx, c, sources, pool)
	if err != nil {
		return r, err
	}
	if d.Plan.Decision.Action.Rolls() {
		// The engine predicts the drains of the rollout from the pods on
		// the nodes now (plan_drain.go).
		if pods := readDrainPods(ctx, c, pool, &d.Warnings); pods != nil {
			d.In.DrainPods = pods
			d.Plan = rollout.Decide(d.In)
		}
	}
	r.Warnings = d.Warnings
	describePlan(&r, d, live, pool)
	return r, nil
}

// dryRun returns the edited pool as the API server would store it
// (defaults, validation), with the live pool's status and annotations.
func dryRun(ctx context.Context, c client.Client, edited, live *nodepoolv1.NodePool) (*nodepoolv1.NodePool, error) {
	if live == nil {
		p := edited.DeepCopy()
		p.ResourceVersion, p.UID, p.Status = "", "", nodepoolv1.NodePoolStatus{}
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return nil, err
		}
		return p, nil
	}
	p := live.DeepCopy()
	p.Spec = *edited.Spec.DeepCopy()
	for k, v := range edited.Labels {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
	for k, v := range edited.Annotations {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
	if err := c.Update(ctx, p, client.DryRunAll); err != nil {
		return nil, err
	}
	p.Status = live.Status
	return p, nil
}

// apiMessage is the API server's message of an error without its prefix.
// rbacDenied reports whether a 403 is the authorizer's (the user may not
// write NodePools: exit 5), not an admission refusal of the pool.
func rbacDenied(err error) bool {
	return apierrors.IsForbidden(err) && rbacDenial.MatchString(apiMessage(err))
}

// rbacDenial is how the API server's authorizer words a refusal.
var rbacDenial = regexp.MustCompile(`User "[^"]*" cannot [a-z]+ resource "`)

func apiMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

// describePlan turns the engine's decision into what the user asked: the
// decision says what happens, for whom and to how many machines; plan only
// words it and adds the strategy's steps.
func describePlan(r *PlanResult, d *decision, live, pool *nodepoolv1.NodePool) {
	in, plan, dec := d.In, d.Plan, d.Plan.Decision
	r.RolloutHash, r.InPlace = in.Hashes.Rollout, inPlaceChanges(live, pool)
	if in.Latest != nil {
		r.PayloadHash = in.Latest.Hash
	}
	r.Strategy, r.MaxSurge, r.MaxUnavailable = dec.Strategy.Name, dec.Strategy.MaxSurge, dec.Strategy.MaxUnavailable
	r.Initiator = string(dec.Initiator)
	r.Machines = dec.Machines
	switch dec.Action {
	case rollout.ActionInvalid:
		r.Rollout, r.Initiator, r.Machines = PlanInvalid, "", 0
		r.Message = "the pool's inputs would be invalid, so nothing changes on the nodes and scale-up keeps booting the payload the pool serves: " + in.RenderErr.Error()
		return
	case rollout.ActionCreate:
		r.Rollout, r.Rolls, r.Steps = PlanCreate, true, dec.Rounds()
		r.Message = fmt.Sprintf("a new pool: %d machines are created, booting payload %s", r.Machines, payload.Short(r.PayloadHash))
		return
	case rollout.ActionStart, rollout.ActionForce:
		r.Rollout, r.Rolls = PlanNow, true
	case rollout.ActionDefer:
		r.Rollout, r.Rolls = PlanDeferred, true
	case rollout.ActionSchedule:
		r.Rollout, r.Rolls = PlanScheduled, true
	default:
		r.Rollout, r.Initiator, r.Machines = PlanNone, "", 0
	}
	// What the machines would run after the rollout that differs from what
	// they run; the drift a rollout does not carry stays pending.
	applied := map[string]bool{}
	if r.Rolls {
		r.Changed = changedComponents(d)
		for _, c := range r.Changed {
			applied[c.Component] = true
		}
	}
	for _, row := range plan.Pending {
		if !applied[row.Component] {
			r.PendingDrift = append(r.PendingDrift, row.Component)
		}
	}
	r.Steps = dec.Rounds()
	windowPlan(r, dec) // window.go
	planHealth(r, dec) // plan_health.go
	planDrains(r, dec) // plan_drain.go
	r.Message = planMessage(r, heldMessage(dec), pool)
}

// changedComponents are the components in which what the machines would
// run differs from what they run, as the engine says
// (Decision.Components).
func changedComponents(d *decision) []PlanComponent {
	var out []PlanComponent
	for _, n := range d.Plan.Decision.Components {
		pc := PlanComponent{Component: n}
		if c, err := inputs.ParseComponent(n); err == nil {
			pc.Class, pc.Delivery = string(c.Class()), string(c.Delivery())
		}
		out = append(out, pc)
	}
	return out
}

// Predict is what `plan` says for a pool, given the engine's input and
// plan: live is the pool as stored (nil for a new pool), pool as it would
// be after the edit.
func Predict(in rollout.Input, plan rollout.Plan, live, pool *nodepoolv1.NodePool) PlanResult {
	r := PlanResult{Namespace: pool.Namespace, Pool: pool.Name}
	describePlan(&r, &decision{In: in, Plan: plan}, live, pool)
	return r
}
