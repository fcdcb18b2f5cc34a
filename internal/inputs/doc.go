// Package inputs is the vocabulary of what a pool's payload depends on: one
// value (Inputs) made once per reconcile, and its classification, one table
// of components, each either rollout (owner intent) or management
// (platform), with a delivery for the latter. Assembly validates and
// normalises the objects the inputs are read from; it does no I/O (package
// gather reads them), so the rollout engine can import this package.
package inputs
