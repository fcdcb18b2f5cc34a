// Package sim is the simulated Cluster API infrastructure provider: a
// SimMachine boots like a real machine, from its user-data and the payload it
// fetches over HTTPS, and registers a Node; a SimControlPlane is its API server.
package sim
