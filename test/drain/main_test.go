// Package drain runs drains end to end on a stack of its own (a real
// kube-apiserver and etcd, the real Cluster API controllers, the real
// payload server over HTTPS and the sim provider, whose Nodes run pods
// that drains evict through the Eviction API): what blocks a drain, how it
// is reported, and the drain policy of Replace and InPlace pools.
package drain

import (
	"testing"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/stack"
)

var (
	st         *stack.Stack
	env        *harness.Env
	settings   controller.Settings
	kubeconfig string
)

func TestMain(m *testing.M) {
	stack.MainChecked(m, func(s *stack.Stack) {
		st, env, settings = s, s.Env, s.Settings
		var err error
		if kubeconfig, err = st.WriteKubeconfig("kubeconfig", "default"); err != nil {
			panic(err)
		}
	})
}
