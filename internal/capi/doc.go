// Package capi runs the real Cluster API core controllers (Cluster, Machine,
// MachineSet, MachineDeployment and the ClusterCache) inside a
// controller-runtime manager, and carries the Cluster API core CRDs, served as
// v1beta2 only. The test harness and the dev environment use it; production
// installs Cluster API with clusterctl instead.
package capi
