package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestAPoolIsPausedByItsClustersPauseOrCAPIsAnnotation(t *testing.T) {
	pool := func(ann map[string]string) *nodepoolv1.NodePool {
		return &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "workers", Annotations: ann}}
	}
	cluster := func(paused *bool, ann map[string]string) *clusterv1.Cluster {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Annotations: ann}, Spec: clusterv1.ClusterSpec{Paused: paused}}
	}
	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster
		pool    *nodepoolv1.NodePool
		says    string // "" when not paused
	}{
		{"a running Cluster", cluster(nil, nil), pool(nil), ""},
		{"spec.paused false", cluster(ptr.To(false), nil), pool(nil), ""},
		{"no Cluster", nil, pool(nil), ""},
		{"clusterctl move's spec.paused", cluster(ptr.To(true), nil), pool(nil), "clusterctl move sets it"},
		{"the Cluster's paused annotation", cluster(nil, map[string]string{clusterv1.PausedAnnotation: ""}), pool(nil), "Cluster c1 carries the annotation cluster.x-k8s.io/paused"},
		{"the pool's paused annotation", cluster(nil, nil), pool(map[string]string{clusterv1.PausedAnnotation: "true"}), "the NodePool carries the annotation"},
		{"the pool's annotation without a Cluster", nil, pool(map[string]string{clusterv1.PausedAnnotation: ""}), "the NodePool carries the annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pausedBy(tc.cluster, tc.pool)
			if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
				t.Errorf("pausedBy = %q, want it to say %q", got, tc.says)
			}
		})
	}
}

func TestThePoolIsOwnedByItsClusterOnceAndFollowsItsUID(t *testing.T) {
	p := &nodepoolv1.NodePool{}
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "u1"}}
	ownByCluster(p, c)
	ownByCluster(p, c)
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "u1" || ptr.Deref(p.OwnerReferences[0].Controller, false) {
		t.Fatalf("owner references %+v", p.OwnerReferences)
	}
	// A moved Cluster has another UID: the reference follows it.
	c.UID = "u2"
	ownByCluster(p, c)
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "u2" {
		t.Fatalf("owner references after the Cluster's UID changed %+v", p.OwnerReferences)
	}
	ownByCluster(p, nil)
	if len(p.OwnerReferences) != 1 {
		t.Fatalf("no Cluster changed the owner references: %+v", p.OwnerReferences)
	}
}

// What the pool makes carries its Cluster's owner reference exactly as
// Cluster API writes it (util.HasExactOwnerRef: no controller flag), and
// nothing when the pool has no Cluster yet.
func TestAPoolsObjectsAreMadeOwnedByItsClusterAsClusterAPIWouldOwnThem(t *testing.T) {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "u1"}}
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "workers"}}
	md := &clusterv1.MachineDeployment{}
	clusterOwned(pool, md)
	if len(md.OwnerReferences) != 0 {
		t.Fatalf("owner references %v for a pool with no Cluster, want none", md.OwnerReferences)
	}
	ownByCluster(pool, c)
	clusterOwned(pool, md)
	clusterOwned(pool, md) // made again: still one
	want := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: "u1"}
	if len(md.OwnerReferences) != 1 || !util.HasExactOwnerRef(md.OwnerReferences, want) {
		t.Errorf("owner references %v, want exactly %v", md.OwnerReferences, want)
	}
}
