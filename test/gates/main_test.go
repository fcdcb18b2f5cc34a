// Package gates runs end-to-end tests of gated rollouts: maintenance
// windows, health gates, fleet rollouts. They mostly wait (soaks, windows,
// deadlines), so they run on a stack of their own (test/stack), beside
// test/integration rather than after it.
package gates

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
