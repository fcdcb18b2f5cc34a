// Package secrets is the schema of the Secrets that the NodePool controller
// writes and the payload server reads: token and payload
// Secrets, their labels and keys, and pure constructors and decoders.
package secrets
