// Package userdata owns the user-data of a nodepool machine: the Ignition
// pointer config that sends a booting machine to the payload server with its
// token and CA, and the Cluster API bootstrap data Secret that carries it.
package userdata
