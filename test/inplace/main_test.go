// Package inplace runs InPlace pools and the autoscaler's count end to end
// on a stack of its own (a real kube-apiserver and etcd, the real Cluster
// API controllers, the real payload server over HTTPS and the sim
// provider, whose node agent updates machines where they run), so it runs
// beside test/integration.
package inplace

import (
	"testing"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/stack"
)

var (
	st       *stack.Stack
	env      *harness.Env
	settings controller.Settings
)

// TestMain fails the suite, too, when a Secret was deleted while referenced.
func TestMain(m *testing.M) {
	stack.MainChecked(m, func(s *stack.Stack) { st, env, settings = s, s.Env, s.Settings })
}
