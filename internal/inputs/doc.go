// Package inputs gathers everything a pool's payload depends on into one value,
// once per reconcile, and classifies it: one table of components, each either
// rollout (owner intent) or management (platform), with a delivery for the latter.
package inputs
