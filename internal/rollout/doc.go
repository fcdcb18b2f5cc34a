// Package rollout is nodepool's rollout engine: a pure function from what
// the controller observed (the pool, its latest payload and hashes, the
// MachineDeployment, the owned Secrets, the Nodes and the clock) to a Plan
// (what to create, where tokens point, annotations, conditions, events,
// pending management drift, what to delete). No client, no I/O: the rules
// of a rollout (docs/rollouts.md) are table-tested here, and the controller only applies.
package rollout
