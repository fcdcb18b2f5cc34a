// Package integration runs the NodePool controller end to end: a real
// kube-apiserver and etcd, the real Cluster API controllers, the real
// payload server over HTTPS, and the sim provider, whose machines fetch
// their payload and register Nodes carrying its labels (test/stack starts
// them all). The gated rollouts (maintenance windows, health gates, fleet
// rollouts) run in test/gates, InPlace pools and the autoscaler's count in
// test/inplace, each on a stack of its own.
package integration

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
