// Package install runs nodepool as `kubectl apply -k config/default` ships
// it: the kustomize build of config/ applied to a real kube-apiserver, and
// the controller and payload server Deployments started as processes of the
// real nodepool binary, with the containers' args, env and ports, each
// authenticated as its ServiceAccount and so bound only by the shipped RBAC.
// The Cluster API controllers and the sim infrastructure provider run
// in-process (test/harness, test/stack); the sim's machines boot by
// fetching their payload from the payload server replicas over HTTPS.
//
// What cannot work outside a cluster is stood in for, and only that (see
// test/process): Secret volume mounts become temporary folders, container
// ports become free loopback ports, the in-cluster ServiceAccount token
// becomes a kubeconfig with a TokenRequest token, and the payload server
// Service (its DNS name and load balancing) becomes a TCP forwarder.
package install
