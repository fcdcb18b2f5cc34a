package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// External edits of a Replace pool's MachineSets. Cluster API makes them
// from the MachineDeployment's template and compares their template with
// it: a MachineSet whose template fields (templateKnobs) someone edited is
// an old one to Cluster API, which replaces its machines. The controller
// finds such an edit as it finds one on the MachineDeployment (external.go):
// a template field last written (managedFields) by a field manager that is
// neither nodepool's nor Cluster API's. A MachineSet whose template is the
// MachineDeployment's is not read again; one that differs (an old one
// during a rollout, or an edited one) is read uncached once per generation.

// capiManagers are the field managers of Cluster API's writes of a
// MachineSet: its MachineDeployment controller's (which makes a MachineSet
// from the template and applies it again as it finds it), its MachineSet
// controller's, and "manager", the manager of a Cluster API controller
// that names none (its binary's).
var capiManagers = []string{"capi-machinedeployment", "capi-machineset", "capi-machineset-metadata", "manager"}

// setRestore is a MachineSet to write the MachineDeployment's values of
// fields back on.
type setRestore struct {
	set    *clusterv1.MachineSet
	fields []string
}

// detectExternalSets finds the external edits of a Replace pool's
// MachineSets' templates. An edit is restored (restoreSets) when the
// MachineSet's original values are the MachineDeployment's (restorable);
// otherwise it is recorded only, saying why.
func (r *Reconciler) detectExternalSets(ctx context.Context, rc *poolReconcile) error {
	if rc.w == nil || rc.w.MachineDeployment == nil || r.APIReader == nil {
		return nil
	}
	md := rc.w.MachineDeployment
	prev, _ := r.checkedSets.Load(rc.pool.UID)
	seen, _ := prev.(map[types.UID]int64)
	checked := map[types.UID]int64{}
	defer r.checkedSets.Store(rc.pool.UID, checked)
	own := append(r.ownManagers(), capiManagers...)
	for i := range rc.w.MachineSets {
		ms := &rc.w.MachineSets[i]
		if ms.DeletionTimestamp != nil {
			continue
		}
		if g, ok := seen[ms.UID]; ok && g == ms.Generation {
			checked[ms.UID] = g
			continue
		}
		differ, err := differingKnobs(ms, md, templateKnobs, false)
		if err != nil {
			return err
		}
		if len(differ) == 0 {
			checked[ms.UID] = ms.Generation
			continue
		}
		fresh := &clusterv1.MachineSet{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ms), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading MachineSet %s for its managedFields: %w", ms.Name, err)
		}
		found := externalWrites(fresh.ManagedFields, templateKnobs, own)
		if len(found) == 0 {
			if back := writtenBack(fresh, md); len(back) > 0 && covers(back, differ) {
				// Recorded when first restored: restored again, unrecorded.
				r.log(rc.pool).Info("Cluster API wrote an edit the controller restored back over the restore; restoring it again",
					"machineSet", fresh.Name, "fields", back)
				rc.w.setRestores = append(rc.w.setRestores, setRestore{set: fresh, fields: back})
				continue
			}
			checked[ms.UID] = ms.Generation
			continue
		}
		var fields []string
		for _, x := range found {
			x.kind, x.name = kindName(fresh), fresh.Name
			fields = append(fields, x.fields...)
			if why := restorable(fresh, rc.w.MachineSets, md, x); why != "" {
				x.kept = why
			}
		}
		rc.w.external = rc.w.external.add(found)
		if !slices.ContainsFunc(found, func(x *externalChange) bool { return x.kept != "" }) {
			rc.w.setRestores = append(rc.w.setRestores, setRestore{set: fresh, fields: fields})
		}
	}
	return nil
}

// restorable says why an edit x of ms cannot be undone, "" when it can:
// ms's values before the edit are the MachineDeployment's template when
// ms was the pool's newest MachineSet (Cluster API's revision) when it was
// written — no newer one was made before — and its template fields that
// nobody outside wrote are the MachineDeployment's. An older MachineSet's
// values are kept nowhere the controller reads: Cluster API keeps no copy
// of the template it was made from, and the pool's history keeps the
// pool's spec, not the template it rendered.
func restorable(ms *clusterv1.MachineSet, sets []clusterv1.MachineSet, md *clusterv1.MachineDeployment, x *externalChange) string {
	rev := revisionOf(ms)
	for i := range sets {
		o := &sets[i]
		if o.UID != ms.UID && revisionOf(o) > rev && o.CreationTimestamp.Time.Before(x.at) {
			return fmt.Sprintf("it was not the pool's newest MachineSet when it was written (%s is newer), and an older MachineSet's template is kept nowhere", o.Name)
		}
	}
	differ, err := differingKnobs(ms, md, templateKnobs, false)
	if err != nil {
		return err.Error()
	}
	for _, k := range differ {
		if !slices.Contains(x.fields, k.name) {
			return fmt.Sprintf("its %s, which nobody outside the pool wrote, is not the MachineDeployment's: it was made from an older template, which is kept nowhere", k.name)
		}
	}
	return ""
}

// writtenBack lists the fields of ms that the controller restored
// (AnnotationRestoredTemplate) and that differ again from the values it
// restored, while the MachineDeployment still holds those values. Cluster
// API's MachineDeployment controller applies each MachineSet whole, its
// template as its cache holds it, with forced ownership: an apply from a
// cache read before the restore writes the edit back, under Cluster API's
// field manager, where the edit's own manager no longer shows.
func writtenBack(ms *clusterv1.MachineSet, md *clusterv1.MachineDeployment) []string {
	raw := ms.Annotations[nodepoolv1.AnnotationRestoredTemplate]
	if raw == "" {
		return nil
	}
	var restored map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &restored); err != nil {
		return nil
	}
	setValues, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ms)
	if err != nil {
		return nil
	}
	mdValues, err := runtime.DefaultUnstructuredConverter.ToUnstructured(md)
	if err != nil {
		return nil
	}
	var out []string
	for _, k := range templateKnobs {
		want, ok := restored[k.name]
		if !ok {
			continue
		}
		if sameJSON(valueAt(mdValues, k.path), want) && !sameJSON(valueAt(setValues, k.path), want) {
			out = append(out, k.name)
		}
	}
	return out
}

// valueAt is the JSON of the value at path (null when there is none).
func valueAt(obj map[string]any, path []string) json.RawMessage {
	v, _ := at(obj, path)
	b, _ := json.Marshal(v)
	return b
}

// sameJSON compares two JSON values by their canonical form.
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return string(ca) == string(cb)
}

// covers reports whether fields name every knob in differ.
func covers(fields []string, differ []knob) bool {
	for _, k := range differ {
		if !slices.Contains(fields, k.name) {
			return false
		}
	}
	return true
}

// revisionOf is a MachineSet's Cluster API revision (0 without one).
func revisionOf(ms *clusterv1.MachineSet) int64 {
	n, _ := strconv.ParseInt(ms.Annotations[clusterv1.RevisionAnnotation], 10, 64)
	return n
}

// restoreSets writes the MachineDeployment's template values of the
// restored fields back on each edited MachineSet, each on the condition
// that it still holds the value read (a JSON patch test: Cluster API's own
// writes of the MachineSet meanwhile, its replicas and annotations, do
// not make the restore fail; a newer edit of the field does, and the next
// reconcile finds it), and records the values written in
// AnnotationRestoredTemplate (writtenBack). Cluster API then takes it for
// the pool's MachineSet again: among those made from the template it
// keeps the one with the most machines.
func (r *Reconciler) restoreSets(ctx context.Context, rc *poolReconcile) error {
	if rc.w == nil || rc.w.MachineDeployment == nil {
		return nil
	}
	want := rc.w.MachineDeployment.Spec.Template.Spec
	for _, s := range rc.w.setRestores {
		got := s.set.Spec.Template.Spec
		var ops []map[string]any
		restored := map[string]any{}
		op := func(field, path string, was, to any) {
			ops = append(ops, map[string]any{"op": "test", "path": path, "value": was}, map[string]any{"op": "replace", "path": path, "value": to})
			restored[field] = to
		}
		for _, f := range s.fields {
			switch f {
			case "spec.template.spec.version":
				op(f, "/spec/template/spec/version", got.Version, want.Version)
			case "spec.template.spec.bootstrap":
				op(f, "/spec/template/spec/bootstrap", got.Bootstrap, want.Bootstrap)
			case "spec.template.spec.infrastructureRef":
				op(f, "/spec/template/spec/infrastructureRef", got.InfrastructureRef, want.InfrastructureRef)
			case "spec.template.spec.failureDomain":
				op(f, "/spec/template/spec/failureDomain", got.FailureDomain, want.FailureDomain)
			}
		}
		if len(ops) == 0 {
			continue
		}
		record, err := json.Marshal(restored)
		if err != nil {
			return err
		}
		if s.set.Annotations == nil {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{nodepoolv1.AnnotationRestoredTemplate: string(record)}})
		} else {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + strings.ReplaceAll(nodepoolv1.AnnotationRestoredTemplate, "/", "~1"), "value": string(record)})
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		if err := r.Client.Patch(ctx, s.set, client.RawPatch(types.JSONPatchType, patch)); client.IgnoreNotFound(err) != nil && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			return fmt.Errorf("restoring the template of MachineSet %s: %w", s.set.Name, err)
		}
	}
	return nil
}
