// Package process runs the shipped Deployments' pods as processes of the
// nodepool binary, for the suites that install nodepool as a user does
// (test/install from config/default, test/clusterctl through clusterctl
// init): each pod's one container with its args and env as they are, and
// stand-ins for what a pod has and a test host lacks (Secret volumes,
// container ports, the ServiceAccount's in-cluster credential).
package process
