package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The controller lists a pool's Secrets, MachineSets, Machines and
// revisions by label in the pool's namespace. The cache finds objects by
// namespace only and then tests every one's labels: with a thousand pools
// in a namespace, each reconcile would scan every pool's objects. These
// indexes, on the labels those lists select by, find a pool's objects
// directly; the label selector is still applied, so a list gives exactly
// what it gave before.
var labelIndexes = []struct {
	label string
	types []client.Object
}{
	{nodepoolv1.LabelPool, []client.Object{&corev1.Secret{}, &clusterv1.MachineSet{}, &clusterv1.Machine{}, &appsv1.ControllerRevision{}}},
	{clusterv1.MachineDeploymentNameLabel, []client.Object{&clusterv1.MachineSet{}, &clusterv1.Machine{}}},
}

func labelIndexName(label string) string { return "label:" + label }

// indexLabels registers the label indexes with the manager's cache.
func indexLabels(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range labelIndexes {
		label := ix.label
		for _, obj := range ix.types {
			err := indexer.IndexField(ctx, obj, labelIndexName(label), func(o client.Object) []string {
				if v, ok := o.GetLabels()[label]; ok {
					return []string{v}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// indexRevisions registers the pool-label index of history records only
// (a shard's fleet rollout cache holds no other indexed type).
func indexRevisions(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &appsv1.ControllerRevision{}, labelIndexName(nodepoolv1.LabelPool), func(o client.Object) []string {
		if v, ok := o.GetLabels()[nodepoolv1.LabelPool]; ok {
			return []string{v}
		}
		return nil
	})
}

// indexedClient is the manager's client whose cached lists of indexed
// types, selecting an indexed label's value, use that label's index.
type indexedClient struct {
	client.Client
}

func (c indexedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector == nil && lo.LabelSelector != nil {
		for _, ix := range labelIndexes {
			v, ok := lo.LabelSelector.RequiresExactMatch(ix.label)
			if ok && indexes(ix.types, list) {
				return c.Client.List(ctx, list, append(opts, client.MatchingFields{labelIndexName(ix.label): v})...)
			}
		}
	}
	return c.Client.List(ctx, list, opts...)
}

// indexes reports whether list is a list of one of types.
func indexes(types []client.Object, list client.ObjectList) bool {
	for _, t := range types {
		switch t.(type) {
		case *corev1.Secret:
			if _, ok := list.(*corev1.SecretList); ok {
				return true
			}
		case *clusterv1.MachineSet:
			if _, ok := list.(*clusterv1.MachineSetList); ok {
				return true
			}
		case *clusterv1.Machine:
			if _, ok := list.(*clusterv1.MachineList); ok {
				return true
			}
		case *appsv1.ControllerRevision:
			if _, ok := list.(*appsv1.ControllerRevisionList); ok {
				return true
			}
		}
	}
	return false
}
