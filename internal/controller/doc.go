// Package controller holds the NodePool reconciler: a thin shell that reads
// the world once per reconcile (inputs, MachineDeployment, owned Secrets,
// Nodes), asks the rollout engine for a plan, applies it and patches the
// pool once. Every decision lives in internal/rollout.
package controller
