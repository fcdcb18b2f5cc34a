package bench

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/harness"
)

// BenchmarkDecodeFleetList decodes the lists a starting controller reads
// (1,000 settled NodePools, 1,000 MachineDeployments) as JSON, what the
// API server serves today, and as CBOR (KEP-4222: CBORServingAndStorage in
// the API server, ClientsAllowCBOR and ClientsPreferCBOR in client-go,
// all alpha and off by default in Kubernetes 1.36). The objects are
// shaped as a settled pool's: every condition, the rollout standing, the
// annotations; their figures are per list (b.N lists), bytes per list in
// B/list.
func BenchmarkDecodeFleetList(b *testing.B) {
	scheme, err := harness.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	lists := map[string]kruntime.Object{"NodePoolList": settledPools(1000), "MachineDeploymentList": machineDeployments(1000)}
	codecs := map[string]kruntime.Serializer{
		"json": kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{}),
		"cbor": cbor.NewSerializer(scheme, scheme),
	}
	for _, kind := range []string{"NodePoolList", "MachineDeploymentList"} {
		for _, enc := range []string{"json", "cbor"} {
			s := codecs[enc]
			var buf bytes.Buffer
			if err := s.Encode(lists[kind], &buf); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			b.Run(kind+"/"+enc, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					into := lists[kind].DeepCopyObject()
					if _, _, err := s.Decode(data, nil, into); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(data)), "B/list")
			})
		}
	}
}

func settledPools(n int) *nodepoolv1.NodePoolList {
	list := &nodepoolv1.NodePoolList{TypeMeta: metav1.TypeMeta{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePoolList"}}
	now := metav1.NewTime(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	hash := func(i int, what string) string { return fmt.Sprintf("%s-%060x", what, i) }
	for i := range n {
		p := fleetPool("fleet-00", fmt.Sprintf("pool-%05d", i), 3, i%2 == 1)
		p.TypeMeta = metav1.TypeMeta{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool"}
		p.UID, p.ResourceVersion, p.Generation, p.CreationTimestamp = "0b7c3f4e-4d1a-4c53-9a43-7c6f1f1f0000", fmt.Sprint(100000+i), 2, now
		p.Finalizers = []string{"nodepool.dev/cleanup"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: "5f0c3c2a-1111-4c53-9a43-7c6f1f1f0000"}}
		p.Annotations = map[string]string{nodepoolv1.AnnotationCurrentPayload: hash(i, "payload"), nodepoolv1.AnnotationCurrentRolloutConfig: hash(i, "config"),
			nodepoolv1.AnnotationBootedPayload: hash(i, "payload")}
		st := &p.Status
		st.ObservedGeneration, st.Replicas, st.DesiredReplicas, st.ReadyReplicas, st.UpdatedReplicas = 2, 3, 3, 3, 3
		st.Version, st.Selector = "v1.36.3", "nodepool.dev/pool="+p.Name
		for _, t := range []string{nodepoolv1.ConditionReady, nodepoolv1.ConditionUpdatingConfig, nodepoolv1.ConditionUpdatingVersion,
			nodepoolv1.ConditionConfigUpdatePending, nodepoolv1.ConditionValidMachineConfig, nodepoolv1.ConditionValidGeneratedPayload,
			nodepoolv1.ConditionReachedIgnitionEndpoint, nodepoolv1.ConditionReconciliationActive, nodepoolv1.ConditionAllMachinesReady,
			nodepoolv1.ConditionAllNodesHealthy, nodepoolv1.ConditionBootstrapDataAvailable, nodepoolv1.ConditionMaintenanceWindow,
			nodepoolv1.ConditionRolloutHealthy} {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "AsExpected", ObservedGeneration: 2,
				LastTransitionTime: now, Message: "every machine runs the pool's payload " + hash(i, "payload")[:20] + " and is ready"})
		}
		st.PendingManagementChanges = []nodepoolv1.PendingManagementChange{{Component: "apiServerProxyImage",
			Desired: "registry.example/haproxy@sha256:" + hash(i, "d")[2:], Current: "registry.example/haproxy@sha256:" + hash(i, "r")[2:], Since: now}}
		st.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseSettled, Settled: true, Message: "every machine runs the current rollout", Boots: hash(i, "payload")}
		list.Items = append(list.Items, *p)
	}
	return list
}

func machineDeployments(n int) *clusterv1.MachineDeploymentList {
	list := &clusterv1.MachineDeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeploymentList"}}
	now := metav1.NewTime(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	for i := range n {
		name := fmt.Sprintf("pool-%05d", i)
		md := clusterv1.MachineDeployment{
			TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-00", Name: name, UID: "0b7c3f4e-4d1a-4c53-9a43-7c6f1f1f0001", ResourceVersion: fmt.Sprint(200000 + i),
				Generation: 2, CreationTimestamp: now, Labels: map[string]string{nodepoolv1.LabelPool: name, clusterv1.ClusterNameLabel: "c1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: name, UID: "0b7c3f4e-4d1a-4c53-9a43-7c6f1f1f0000", Controller: ptr.To(true)}}},
			Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1", Replicas: ptr.To[int32](3),
				Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.36.3",
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-user-data-0123456789")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.nodepool.dev", Kind: "SimMachineTemplate", Name: name + "-0123456789"}}}},
		}
		md.Status.ObservedGeneration, md.Status.Replicas, md.Status.ReadyReplicas = 2, ptr.To[int32](3), ptr.To[int32](3)
		md.Status.AvailableReplicas, md.Status.UpToDateReplicas = ptr.To[int32](3), ptr.To[int32](3)
		for _, t := range []string{"Available", "MachinesReady", "MachinesUpToDate", "ScalingUp", "ScalingDown", "Remediating", "Deleting", "Paused", "RollingOut"} {
			md.Status.Conditions = append(md.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: "NotScalingUp", ObservedGeneration: 2, LastTransitionTime: now})
		}
		list.Items = append(list.Items, md)
	}
	return list
}
