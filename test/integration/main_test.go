// Package integration runs the NodePool controller end to end: a real
// kube-apiserver and etcd, the real Cluster API controllers, the real
// payload server over HTTPS, and the sim provider, whose machines fetch
// their payload and register Nodes carrying its labels (test/stack starts
// them all).
package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

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
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if st, err = stack.Start(context.Background()); err != nil {
		return 0, err
	}
	defer func() {
		if err := st.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the stack:", err)
		}
	}()
	env, settings = st.Env, st.Settings
	checker = startReferenceChecker(env)
	code := m.Run()
	if v := checker.violations(); len(v) > 0 {
		fmt.Fprintln(os.Stderr, "INVARIANT VIOLATED: Secrets deleted while referenced:", v)
		code = 1
	}
	return code, nil
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

func repeat(s string, n int) string { return strings.Repeat(s, n) }
