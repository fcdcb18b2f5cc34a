// Package poolmath holds the small arithmetic of a pool that the engine,
// the controller and the CLI all need: whether the pool is paused, how
// many machines it wants, whether a forced rollout was carried out, which
// machines a forced rollout replaces, and how many machines Cluster API
// or an in-place update takes at once. Each rule lives here once; every
// caller asks this package, so the CLI never says otherwise than the
// controller does.
package poolmath
