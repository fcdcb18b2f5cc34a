// Package scenario is a deterministic, simulated-time model of a pool's
// world that drives the real rollout engine (rollout.Decide) and the
// fleet decision (fleet.Decide): a NodePool with its Secrets and stored
// payloads, a MachineDeployment with MachineSets and Machines following
// Cluster API's rolling-update arithmetic (or an InPlace MachineSet with a
// node agent), nodes that turn healthy or not by the payload they boot, a
// MachineHealthCheck, and a clock. Each step builds the engine's Input
// from the model as the controller observes it, applies the Plan as the
// controller does, checks invariants, and moves the clock to the next
// event. There is no client, no I/O and no real time: the same script
// gives the same trace.
package scenario
