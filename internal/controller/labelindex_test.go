package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The label indexes change what a list costs, never what it gives.
func TestAListThroughTheLabelIndexesGivesWhatTheLabelSelectorDoes(t *testing.T) {
	scheme, _ := testPool()
	_ = clusterv1.AddToScheme(scheme)
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, ix := range labelIndexes {
		label := ix.label
		for _, obj := range ix.types {
			b = b.WithIndex(obj, labelIndexName(label), func(o client.Object) []string {
				if v, ok := o.GetLabels()[label]; ok {
					return []string{v}
				}
				return nil
			})
		}
	}
	var objs []client.Object
	for i, ns := range []string{"a", "b"} {
		for p := range 3 {
			pool := fmt.Sprintf("pool-%d", p)
			objs = append(objs,
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool + "-token", Labels: map[string]string{nodepoolv1.LabelPool: pool, "kind": "token"}}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool + "-user-data", Labels: map[string]string{nodepoolv1.LabelPool: pool, "kind": "user-data"}}},
				&clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool + "-ms", Labels: map[string]string{
					nodepoolv1.LabelPool: pool, clusterv1.MachineDeploymentNameLabel: pool, clusterv1.ClusterNameLabel: fmt.Sprintf("c%d", i)}}},
			)
		}
		objs = append(objs,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"}},
			// A hand-made MachineDeployment's MachineSet: the deployment label only.
			&clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "handmade-ms", Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: "pool-1"}}},
		)
	}
	c := b.WithObjects(objs...).Build()
	ix := indexedClient{c}
	ctx := context.Background()
	names := func(list client.ObjectList) []string {
		var out []string
		switch l := list.(type) {
		case *corev1.SecretList:
			for _, s := range l.Items {
				out = append(out, s.Namespace+"/"+s.Name)
			}
		case *clusterv1.MachineSetList:
			for _, s := range l.Items {
				out = append(out, s.Namespace+"/"+s.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name string
		list func() client.ObjectList
		opts []client.ListOption
		want int
	}{
		{"a pool's Secrets", func() client.ObjectList { return &corev1.SecretList{} }, []client.ListOption{client.InNamespace("a"), client.MatchingLabels{nodepoolv1.LabelPool: "pool-1"}}, 2},
		{"a pool's token Secret", func() client.ObjectList { return &corev1.SecretList{} }, []client.ListOption{client.InNamespace("a"), client.MatchingLabels{nodepoolv1.LabelPool: "pool-1", "kind": "token"}}, 1},
		{"a pool's Secrets everywhere", func() client.ObjectList { return &corev1.SecretList{} }, []client.ListOption{client.MatchingLabels{nodepoolv1.LabelPool: "pool-2"}}, 4},
		{"every Secret of a namespace", func() client.ObjectList { return &corev1.SecretList{} }, []client.ListOption{client.InNamespace("b")}, 7},
		{"a deployment's MachineSets, foreign included", func() client.ObjectList { return &clusterv1.MachineSetList{} }, []client.ListOption{client.InNamespace("a"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "pool-1"}}, 2},
		{"a pool's MachineSets of its cluster", func() client.ObjectList { return &clusterv1.MachineSetList{} }, []client.ListOption{client.InNamespace("b"), client.MatchingLabels{nodepoolv1.LabelPool: "pool-0", clusterv1.ClusterNameLabel: "c1"}}, 1},
		{"of another cluster: none", func() client.ObjectList { return &clusterv1.MachineSetList{} }, []client.ListOption{client.InNamespace("b"), client.MatchingLabels{nodepoolv1.LabelPool: "pool-0", clusterv1.ClusterNameLabel: "c0"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, indexed := tc.list(), tc.list()
			if err := c.List(ctx, plain, tc.opts...); err != nil {
				t.Fatal(err)
			}
			if err := ix.List(ctx, indexed, tc.opts...); err != nil {
				t.Fatal(err)
			}
			if got, want := names(indexed), names(plain); !slices.Equal(got, want) || len(got) != tc.want {
				t.Fatalf("through the index %v, by labels %v (want %d)", got, want, tc.want)
			}
		})
	}
}
