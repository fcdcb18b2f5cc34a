//go:build tools

// Package tools pins the etcd server built for the test control plane.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
