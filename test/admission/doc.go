// Package admission runs the admission policies nodepool ships on a pool's
// MachineDeployment and MachineSets (config/rbac/machinedeployment_policy.yaml,
// which the chart and clusterctl's components copy) against a real
// kube-apiserver, with no controller running: each write is made as an
// administrator, as the NodePool controller's ServiceAccount and as Cluster
// API's, and the tests say which the policies refuse, with what message.
// test/install and test/clusterctl run the same policies beside the
// controller and Cluster API, whose own writes they must let through.
package admission
