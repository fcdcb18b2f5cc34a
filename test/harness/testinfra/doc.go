// Package testinfra is the smallest Cluster API infrastructure and
// control-plane provider that lets the real Cluster API controllers run a
// MachineDeployment to Running machines with Nodes: a TestMachine becomes a
// Node at once, a TestControlPlane reports a hosted, initialised control
// plane. It proves the harness; the sim provider is the full one.
package testinfra
