package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// External changes. The admission policies refuse a write by anyone but
// nodepool and Cluster API to the fields of a pool's MachineDeployment (or
// an InPlace pool's MachineSet) that roll, pause or hold its machines.
// Where they are absent (no ValidatingAdmissionPolicy, `nodepool dev up`
// before they were installed, an identity a binding exempts), the
// controller finds such a write: a field that is not what the controller
// would write, last written (managedFields) by a field manager that is not
// nodepool's. It records it in the pool's history (initiator external;
// external_record.go), says it in an event and in status.rollout.external,
// and writes its own values back in the same reconcile. Cluster API's
// cache strips managedFields: the object is read once more, uncached, only
// when a field differs.

// knob is a field that rolls, pauses or holds a pool's machines.
type knob struct {
	// name is how records, events and the docs name it.
	name string
	// path is the field in the object's JSON ("metadata", "annotations",
	// key for an annotation); managedFields name it with "f:" prefixes.
	path []string
	// rolls is true for a field the controller's own rollouts change: a
	// difference while the engine starts a rollout is the controller's.
	rolls bool
}

var (
	pausedAnnotationKnob = knob{name: "metadata.annotations[" + clusterv1.PausedAnnotation + "]", path: []string{"metadata", "annotations", clusterv1.PausedAnnotation}}
	templateKnobs        = []knob{
		{name: "spec.template.spec.version", path: []string{"spec", "template", "spec", "version"}, rolls: true},
		{name: "spec.template.spec.bootstrap", path: []string{"spec", "template", "spec", "bootstrap"}, rolls: true},
		{name: "spec.template.spec.infrastructureRef", path: []string{"spec", "template", "spec", "infrastructureRef"}, rolls: true},
		{name: "spec.template.spec.failureDomain", path: []string{"spec", "template", "spec", "failureDomain"}, rolls: true},
	}
	rolloutAfterKnob = knob{name: "spec.rollout.after", path: []string{"spec", "rollout", "after"}, rolls: true}
	// machineDeploymentKnobs are a Replace pool's MachineDeployment's.
	machineDeploymentKnobs = append([]knob{rolloutAfterKnob, {name: "spec.paused", path: []string{"spec", "paused"}}, pausedAnnotationKnob}, templateKnobs...)
	// inPlaceRolloutAfterKnob is an InPlace pool's forced rollout time.
	inPlaceRolloutAfterKnob = knob{name: "metadata.annotations[" + nodepoolv1.AnnotationInPlaceRolloutAfter + "]",
		path: []string{"metadata", "annotations", nodepoolv1.AnnotationInPlaceRolloutAfter}, rolls: true}
	// machineSetKnobs are an InPlace pool's MachineSet's.
	machineSetKnobs = append([]knob{inPlaceRolloutAfterKnob, pausedAnnotationKnob}, templateKnobs...)
)

// externalChange is what one field manager wrote, as one reconcile found it.
type externalChange struct {
	// kind and name are the object's.
	kind, name string
	// manager wrote fields; at is when (managedFields).
	manager string
	at      time.Time
	fields  []string
	// kept says why the change could not be undone ("" when the
	// controller restores its values): it is recorded only.
	kept string
}

// externalChanges are the changes one reconcile found, one per manager.
type externalChanges []*externalChange

// restores reports whether a change wrote the knob k.
func (xs externalChanges) restores(k knob) bool {
	return slices.ContainsFunc(xs, func(x *externalChange) bool { return slices.Contains(x.fields, k.name) })
}

// add merges found into xs, by manager.
func (xs externalChanges) add(found []*externalChange) externalChanges {
	for _, f := range found {
		i := slices.IndexFunc(xs, func(x *externalChange) bool { return x.manager == f.manager })
		if i < 0 {
			xs = append(xs, f)
			continue
		}
		xs[i].fields = append(xs[i].fields, f.fields...)
		if f.at.After(xs[i].at) {
			xs[i].at = f.at
		}
	}
	return xs
}

// scaled is the pool's MachineDeployment (an InPlace pool's MachineSet),
// with its knobs: forced is the one that forces a rollout, the others
// are the rest. nil when there is none.
func (w *world) scaled() (obj client.Object, forced knob, others []knob) {
	if w.MachineDeployment != nil {
		return w.MachineDeployment, rolloutAfterKnob, machineDeploymentKnobs[1:]
	}
	if w.InPlaceSet != nil {
		return w.InPlaceSet, inPlaceRolloutAfterKnob, machineSetKnobs[1:]
	}
	return nil, knob{}, nil
}

// forcedTime is the forced rollout time obj carries ("" for none).
func forcedTime(obj client.Object) string {
	switch o := obj.(type) {
	case *clusterv1.MachineDeployment:
		if o.Spec.Rollout.After.IsZero() {
			return ""
		}
		return o.Spec.Rollout.After.UTC().Format(time.RFC3339)
	case *clusterv1.MachineSet:
		return o.Annotations[nodepoolv1.AnnotationInPlaceRolloutAfter]
	}
	return ""
}

// detectExternalForce runs before the engine decides. The engine keeps the
// forced rollout time it finds on the MachineDeployment (a forced rollout
// is never undone), so whose it is can only be told by managedFields: a
// time this process has not seen as the controller's is checked, once,
// with an uncached read. One someone else wrote is taken out of the
// engine's input (it decides on the controller's state) and written back
// (apply.go).
func (r *Reconciler) detectExternalForce(ctx context.Context, rc *poolReconcile) error {
	if rc.w == nil || r.APIReader == nil {
		return nil
	}
	obj, forced, _ := rc.w.scaled()
	v := ""
	if obj != nil {
		v = forcedTime(obj)
	}
	if seen, ok := r.ownForced.Load(rc.pool.UID); v == "" || (ok && seen == v) {
		return nil
	}
	fresh, err := r.readFresh(ctx, rc.w, obj)
	if err != nil || fresh == nil {
		return err
	}
	found := externalWrites(fresh.GetManagedFields(), []knob{forced}, r.ownManagers())
	if len(found) == 0 {
		r.ownForced.Store(rc.pool.UID, forcedTime(fresh))
		return nil
	}
	for _, x := range found {
		x.kind, x.name = kindName(obj), obj.GetName()
	}
	rc.w.external = rc.w.external.add(found)
	if md := rc.in.MachineDeployment; md != nil {
		md.RolloutAfter, md.MachinesBeforeRolloutAfter = nil, 0
	}
	return nil
}

// readFresh reads obj uncached (with its managedFields), once per
// reconcile; nil when it is gone.
func (r *Reconciler) readFresh(ctx context.Context, w *world, obj client.Object) (client.Object, error) {
	if w.fresh != nil {
		return w.fresh, nil
	}
	fresh := obj.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	w.fresh = fresh
	return fresh, nil
}

// detectExternal compares the pool's MachineDeployment (an InPlace pool's
// MachineSet) with what the controller writes now, and for the knobs that
// differ asks managedFields who wrote them. The engine's decision is the
// controller's: a template field that differs while it starts a rollout is
// its own.
func (r *Reconciler) detectExternal(ctx context.Context, rc *poolReconcile) error {
	if rc.w == nil || rc.plan == nil || r.APIReader == nil {
		return nil
	}
	obj, _, knobs := rc.w.scaled()
	if obj == nil {
		return nil
	}
	pool, d, target := rc.pool, rc.plan.Decision, rc.plan.MachineDeployment
	var desired client.Object
	switch o := obj.(type) {
	case *clusterv1.MachineDeployment:
		want := o.DeepCopy()
		desiredMachineDeployment(want, pool, d, target)
		desired = want
	case *clusterv1.MachineSet:
		want := o.DeepCopy()
		desiredMachineSet(want, pool, d, target)
		desired = want
	}
	differ, err := differingKnobs(obj, desired, knobs, rc.plan.Record != nil)
	if err != nil || len(differ) == 0 {
		return err
	}
	fresh, err := r.readFresh(ctx, rc.w, obj) // the cache strips managedFields
	if err != nil || fresh == nil {
		return err
	}
	found := externalWrites(fresh.GetManagedFields(), differ, r.ownManagers())
	for _, x := range found {
		x.kind, x.name = kindName(obj), obj.GetName()
	}
	rc.w.external = rc.w.external.add(found)
	return nil
}

// ownManagers are the field managers of nodepool's writes: the shard's,
// and "nodepool", the manager of a controller that named none (its
// binary's user agent).
func (r *Reconciler) ownManagers() []string {
	return []string{r.Settings.Shard.FieldManager(), "nodepool"}
}

// differingKnobs lists the knobs whose values differ between read and
// desired, leaving out the rollout knobs while the engine starts a rollout.
func differingKnobs(read, desired client.Object, knobs []knob, starting bool) ([]knob, error) {
	a, err := runtime.DefaultUnstructuredConverter.ToUnstructured(read)
	if err != nil {
		return nil, err
	}
	b, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, err
	}
	var out []knob
	for _, k := range knobs {
		if k.rolls && starting {
			continue
		}
		va, oka := at(a, k.path)
		vb, okb := at(b, k.path)
		if oka != okb || !equality.Semantic.DeepEqual(va, vb) {
			out = append(out, k)
		}
	}
	return out, nil
}

// at is the value at path in an object's JSON form.
func at(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	if cur == nil {
		return nil, false
	}
	if s, ok := cur.(string); ok && s == "" && path[0] != "metadata" {
		return nil, false // an empty string field is no field
	}
	return cur, true
}

// externalWrites finds, among the knobs given, those a field manager
// other than own last wrote (an Update or Apply of the object, not of its
// status): one change per such manager. None when nodepool wrote every
// one (or nobody owns them: a field removed).
func externalWrites(entries []metav1.ManagedFieldsEntry, differ []knob, own []string) []*externalChange {
	var out []*externalChange
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil || slices.Contains(own, e.Manager) {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		var wrote []string
		for _, k := range differ {
			if owns(fields, k.path) {
				wrote = append(wrote, k.name)
			}
		}
		if len(wrote) == 0 {
			continue
		}
		x := &externalChange{manager: e.Manager, fields: wrote}
		if e.Time != nil {
			x.at = e.Time.Time
		}
		out = append(out, x)
	}
	return out
}

// owns reports whether a managedFields set names the field at path (or
// a field inside it).
func owns(fields map[string]any, path []string) bool {
	cur := fields
	for _, p := range path {
		next, ok := cur["f:"+p].(map[string]any)
		if !ok {
			return false
		}
		cur = next
	}
	return true
}

// describe is the change as events and status.rollout say it.
func (x *externalChange) describe(revision int64, pool *nodepoolv1.NodePool) string {
	done := "the controller restored its own values"
	if x.kept != "" {
		done = "the controller could not restore them: " + x.kept + "; Cluster API replaces its machines"
	}
	return fmt.Sprintf("%s wrote %s of %s %s at %s, outside the pool (recorded as revision %d, initiator external); %s. "+
		"Roll, pause or undo the pool with `kubectl nodepool rollout restart|pause|undo %s -n %s`",
		x.manager, strings.Join(x.fields, ", "), x.kind, x.name, x.at.UTC().Format(time.RFC3339), revision, done, pool.Name, pool.Namespace)
}

// ownRolloutAfter is the MachineDeployment's spec.rollout.after as the
// controller writes it back over one written outside the pool: the
// target's forced rollout time, or none.
func ownRolloutAfter(target *rollout.MachineDeploymentTarget) metav1.Time {
	if target == nil || target.RolloutAfter == nil {
		return metav1.Time{}
	}
	return metav1.NewTime(*target.RolloutAfter)
}
