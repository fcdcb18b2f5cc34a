// Package clusterctl installs nodepool the way Cluster API users install
// providers, with the clusterctl library of the pinned Cluster API
// (sigs.k8s.io/cluster-api/cmd/clusterctl/client), offline: `clusterctl init
// --addon nodepool` from a local file:// provider repository holding the
// files a release ships (hack/clusterctl), on a management cluster where
// Cluster API's core provider is installed and recorded in clusterctl's
// inventory. The Deployments clusterctl applied then run as processes of
// the real nodepool binary, each as its ServiceAccount (test/process, as
// test/install runs the release manifest), and reconcile a pool; and
// Cluster API's own `clusterctl alpha rollout` commands on that pool's
// MachineDeployment are refused with the `kubectl nodepool rollout` command
// to use.
//
// Cluster API's controllers run in-process as the ServiceAccount
// `clusterctl init` gives them (impersonated), so the admission policies
// see them as they would in a cluster. What cannot run here is stood in
// for: cert-manager, which clusterctl requires, is its two CRDs, and the
// test issues the Certificate nodepool ships (certmanager_test.go); the
// payload server Service is a TCP forwarder.
package clusterctl
