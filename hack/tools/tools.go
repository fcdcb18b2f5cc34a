//go:build tools

// Package tools pins the programs hack/tools builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
