// Package integration runs the NodePool controller end to end: a real
// kube-apiserver and etcd, the real Cluster API controllers, the real
// payload server over HTTPS, and the sim provider, whose machines fetch
// their payload and register Nodes carrying its labels (test/stack starts
// them all).
package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/stack"
)

var (
	st       *stack.Stack
	env      *harness.Env
	settings controller.Settings
	checker  *referenceChecker
)

func TestMain(m *testing.M) {
	stack.Main(m, func(s *stack.Stack) error {
		st, env, settings = s, s.Env, s.Settings
		checker = startReferenceChecker(env)
		return nil
	}, func(code int) int {
		if v := checker.violations(); len(v) > 0 {
			fmt.Fprintln(os.Stderr, "INVARIANT VIOLATED: Secrets deleted while referenced:", v)
			return 1
		}
		return code
	})
}

// restartController stops the controller and starts it with new settings
// (a nodepool upgrade, a restart mid-rollout).
func restartController(t *testing.T, s controller.Settings) {
	t.Helper()
	if err := st.RestartController(s); err != nil {
		t.Fatal(err)
	}
}

func managementConfig(proxyImage string) *corev1.ConfigMap { return stack.ManagementConfig(proxyImage) }

// freshDigest is a sha256 digest no earlier call returned, in this run or
// another against the same API server (-count, a replayed test): a
// management change that sets the value the config already holds changes
// nothing, and a test waiting for it to roll would wait in vain.
func freshDigest() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d/%d", time.Now().UnixNano(), digests.Add(1))))
	return hex.EncodeToString(sum[:])
}

var digests atomic.Int64
