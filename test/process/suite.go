package process

import (
	"fmt"
	"os"
	"testing"

	"nodepool.dev/nodepool/test/harness"
)

// RunSuite is the body of the TestMain of a suite that runs nodepool's
// Deployments as processes on a control plane of its own. setup starts the
// control plane (setting *env) and what the tests need; a failed setup is
// printed after name, and the control plane stopped if it started. After
// the tests, stop (if not nil) ends what setup started, then the control
// plane stops. It returns the exit code.
func RunSuite(m *testing.M, name string, env **harness.Env, setup func() error, stop func()) int {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		if *env != nil {
			_ = (*env).Stop()
		}
		return 1
	}
	code := m.Run()
	if stop != nil {
		stop()
	}
	if err := (*env).Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	return code
}
