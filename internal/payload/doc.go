// Package payload renders a pool's Ignition payload from its inputs: one
// fragment per component, merged; the digest manifest; the rollout and payload
// hashes; and the names of the objects derived from them. Pure: no client.
package payload
