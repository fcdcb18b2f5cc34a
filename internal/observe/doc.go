// Package observe reads what a pool is made of and what its machines run,
// and turns it into the rollout engine's input: the latest payload rendered
// from the pool's current inputs, its MachineDeployment, MachineSets and
// Machines, and the user-data, token and payload Secrets it owns. The
// controller and the kubectl plugin (`plan`, `diff`) both observe through it,
// so the CLI predicts from exactly what the controller decides from.
package observe
