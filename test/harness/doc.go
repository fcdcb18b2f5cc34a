// Package harness starts the real control plane every integration test runs
// against: etcd and kube-apiserver (built once into bin/k8s by
// hack/tools/build-control-plane.sh), the CRDs of Cluster API core (v1beta2),
// nodepool and the sim provider, and the real Cluster API core controllers
// in-process.
package harness
