// Package sim is the simulated Cluster API infrastructure provider: a
// SimMachine boots like a real machine, from its user-data and the payload it
// fetches over HTTPS, and registers a Node; a SimControlPlane is its API server.
// Every Cluster's Nodes live on one API server; with Options.ClusterViewsAddress
// each Cluster's kubeconfig reaches a view of it holding its own Nodes only
// (cluster_view.go), as a fleet's Clusters are each their own API server.
//
// Each booted SimMachine also runs a node agent that takes part in the node
// update protocol of InPlace pools (api/v1alpha1/nodeupdate.go) on its Node:
// asked for a desired payload, it reports Working, waits the machine's update
// delay, fetches the payload with the pointer config of the update Secret,
// checks it is the desired one, swaps the old payload's Node labels for the
// new one's and reports the new current payload and Done; or Degraded, saying
// why, and retries until the cause is gone.
//
// Knobs make machines slow, broken or unhealthy for tests and demos, as spec
// fields of SimMachine (and SimMachineTemplate) or annotations on the
// SimMachine or its Machine (knobs.go):
//
//	spec.bootDelay    sim.nodepool.dev/boot-delay: "10s"     power-on time before the payload fetch
//	spec.failBoot     sim.nodepool.dev/fail-boot: "true"     never boots
//	spec.unhealthy    sim.nodepool.dev/unhealthy: "true"     the Node turns NotReady
//	spec.updateDelay  sim.nodepool.dev/update-delay: "5s"    time an in-place update takes, from Working
//	spec.failUpdate   sim.nodepool.dev/fail-update: "<why>"  in-place updates stay Degraded with that message
//	spec.workloads    sim.nodepool.dev/workloads: "guarded,bare,slow=90s"  pods on the Node for drains to evict
//
// The workload cluster has no kubelet, scheduler or controller manager: for
// the pods of spec.workloads the sim plays the kubelet, the pod garbage
// collector and the disruption controller (workload_pods.go).
//
// The provider-wide defaults of the delays are Options.BootDelay and
// Options.UpdateDelay (flags --boot-delay and --update-delay).
package sim
