// Package simtest builds what simulated machines boot from in integration
// tests: a Cluster on a SimControlPlane, templates, a wired MachineDeployment,
// an in-process payload server, and a pool's payload, token and user-data.
package simtest
