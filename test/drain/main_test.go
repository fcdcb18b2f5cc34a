// Package drain runs drains end to end on a stack of its own (a real
// kube-apiserver and etcd, the real Cluster API controllers, the real
// payload server over HTTPS and the sim provider, whose Nodes run pods
// that drains evict through the Eviction API): what blocks a drain, how it
// is reported, and the drain policy of Replace and InPlace pools.
package drain

import (
	"flag"
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

// TestMain runs up to 4 tests at once whatever GOMAXPROCS says: they
// wait, mostly, for Cluster API's drain retries (every 20s) and the drain
// policy's timeouts (30s).
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("test.parallel", "4")
	}
	stack.MainChecked(m, func(s *stack.Stack) {
		st, env, settings = s, s.Env, s.Settings
		var err error
		if kubeconfig, err = st.WriteKubeconfig("kubeconfig", "default"); err != nil {
			panic(err)
		}
	})
}
