// Package bench holds benchmarks that need the whole test control plane:
// a scale run of simulated machines through the real Cluster API
// controllers and the real payload server (`make bench`).
package bench
