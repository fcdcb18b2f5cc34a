// Package harness starts the real control plane every integration test runs
// against: etcd and kube-apiserver (built once into bin/k8s by
// hack/tools/build-control-plane.sh), the Cluster API core CRDs (v1beta2) and
// nodepool's, and the real Cluster API core controllers in-process.
package harness
