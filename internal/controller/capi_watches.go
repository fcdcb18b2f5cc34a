package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Cluster API writes the status of every MachineDeployment, MachineSet and
// Machine as its controllers see fit (a heartbeat of a condition's
// message, a field the pool never reads, a resync of the whole fleet): a
// pool is woken only when what it reads of one of them changed, so a
// settled fleet stays asleep while Cluster API writes. What a pool reads
// of each (internal/observe, and the controller's apply of them) is the
// projection below: its metadata, its spec, and the few status fields the
// engine's summary of it takes. A field added to what the pool reads must
// be added here, or its changes wait for the next resync.

// seenMeta is what a pool reads of a Cluster API object's metadata.
type seenMeta struct {
	Generation        int64
	Labels            map[string]string
	Annotations       map[string]string
	OwnerReferences   []metav1.OwnerReference
	DeletionTimestamp *metav1.Time
}

func metaOf(o metav1.Object) seenMeta {
	return seenMeta{Generation: o.GetGeneration(), Labels: o.GetLabels(), Annotations: o.GetAnnotations(),
		OwnerReferences: o.GetOwnerReferences(), DeletionTimestamp: o.GetDeletionTimestamp()}
}

type seenMachineDeployment struct {
	Meta                              seenMeta
	Spec                              *clusterv1.MachineDeploymentSpec
	Replicas, ReadyReplicas, UpToDate *int32
	ObservedGeneration                int64
}

type seenMachineSet struct {
	Meta                    seenMeta
	Spec                    *clusterv1.MachineSetSpec
	Replicas, ReadyReplicas *int32
	ObservedGeneration      int64
}

type seenMachine struct {
	Meta     seenMeta
	Spec     *clusterv1.MachineSpec
	NodeRef  clusterv1.MachineNodeReference
	Deletion *clusterv1.MachineDeletionStatus
	// Conditions are those a pool reads: the node's readiness as Cluster
	// API mirrors it, the health gate's, and the drain's.
	Conditions []metav1.Condition
}

// seenConditions are the Machine conditions a pool reads.
var seenConditions = map[string]bool{
	clusterv1.MachineNodeReadyCondition: true,
	nodepoolv1.HealthGateCondition:      true,
	clusterv1.MachineDeletingCondition:  true,
}

// seenByPool is what a pool reads of a MachineDeployment, MachineSet or
// Machine; nil for another kind (then every change counts).
func seenByPool(o client.Object) any {
	switch o := o.(type) {
	case *clusterv1.MachineDeployment:
		return seenMachineDeployment{Meta: metaOf(o), Spec: &o.Spec, Replicas: o.Status.Replicas, ReadyReplicas: o.Status.ReadyReplicas,
			UpToDate: o.Status.UpToDateReplicas, ObservedGeneration: o.Status.ObservedGeneration}
	case *clusterv1.MachineSet:
		return seenMachineSet{Meta: metaOf(o), Spec: &o.Spec, Replicas: o.Status.Replicas, ReadyReplicas: o.Status.ReadyReplicas,
			ObservedGeneration: o.Status.ObservedGeneration}
	case *clusterv1.Machine:
		m := seenMachine{Meta: metaOf(o), Spec: &o.Spec, NodeRef: o.Status.NodeRef, Deletion: o.Status.Deletion}
		for _, c := range o.Status.Conditions {
			if seenConditions[c.Type] {
				m.Conditions = append(m.Conditions, c)
			}
		}
		return m
	}
	return nil
}

// seenChanged reports whether an update of a Cluster API object changed
// what its pool reads of it.
func seenChanged(old, updated client.Object) bool {
	a, b := seenByPool(old), seenByPool(updated)
	if a == nil || b == nil {
		return true
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// poolReads lets through the creates and deletes of a Cluster API object
// and the updates that change what its pool reads of it (seenByPool),
// and counts the updates it lets through and those it drops.
var poolReads = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		changed := seenChanged(e.ObjectOld, e.ObjectNew)
		result := "ignored"
		if changed {
			result = "woke"
		}
		capiUpdates.WithLabelValues(kindName(e.ObjectNew), result).Inc()
		return changed
	},
}

var capiUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodepool_capi_updates_total",
	Help: "Updates of Cluster API MachineDeployments, MachineSets and Machines seen, by kind and result: woke (what the pool reads changed: the pool is reconciled) or ignored.",
}, []string{"kind", "result"})

func init() { metrics.Registry.MustRegister(capiUpdates) }

func kindName(o client.Object) string {
	switch o.(type) {
	case *clusterv1.MachineDeployment:
		return "MachineDeployment"
	case *clusterv1.MachineSet:
		return "MachineSet"
	case *clusterv1.Machine:
		return "Machine"
	}
	return "other"
}
