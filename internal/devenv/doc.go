// Package devenv is `nodepool dev`: an embedded development environment
// (etcd and kube-apiserver from bin/k8s, the Cluster API core controllers,
// the NodePool controller, the payload server and the sim provider in one
// process, state kept in a data dir) and a narrated demo played against it.
package devenv
