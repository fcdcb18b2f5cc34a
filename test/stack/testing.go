package stack

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Main is the TestMain of a suite that runs against the stack: it starts
// the stack, calls setup with it, runs the tests, calls check with their
// exit code (check may turn a pass into a failure; nil keeps it), stops the
// stack and exits.
func Main(m *testing.M, setup func(*Stack) error, check func(code int) int) {
	code, err := run(m, setup, check)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M, setup func(*Stack) error, check func(int) int) (int, error) {
	st, err := Start(context.Background())
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := st.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the stack:", err)
		}
	}()
	if setup != nil {
		if err := setup(st); err != nil {
			return 0, err
		}
	}
	code := m.Run()
	if check != nil {
		code = check(code)
	}
	return code, nil
}

// PollInterval is how often WaitFor looks.
const PollInterval = 300 * time.Millisecond

// WaitFor reads a state until ok holds for it, and returns it; after
// timeout it fails the test with what it waited for and describe of the
// last state.
func WaitFor[S any](t testing.TB, timeout time.Duration, what string, read func() S, ok func(S) bool, describe func(S) string) S {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var s S
	for time.Now().Before(deadline) {
		s = read()
		if ok(s) {
			return s
		}
		time.Sleep(PollInterval)
	}
	t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, describe(s))
	return s
}

// Settled reports whether the controller says a pool of n machines is
// settled: it has seen the latest spec, no rollout is in progress, n
// machines exist, all up to date and ready, and the pool is Ready. Every
// test asks this one definition (adding what it observes itself, such as
// machine UIDs or nodes).
func Settled(p *nodepoolv1.NodePool, n int) bool {
	st := p.Status
	return st.ObservedGeneration == p.Generation && st.Updating == "" &&
		st.Replicas == int32(n) && st.UpdatedReplicas == int32(n) && st.ReadyReplicas == int32(n) &&
		meta.IsStatusConditionTrue(st.Conditions, nodepoolv1.ConditionReady)
}

// MainChecked is Main for a suite whose Secrets must never be deleted while
// referenced: a ReferenceChecker follows the stack, and the suite fails
// when it saw such a deletion. set receives the stack before any test.
func MainChecked(m *testing.M, set func(*Stack)) {
	var checker ReferenceChecker
	Main(m, func(s *Stack) error {
		set(s)
		return checker.Start(s.Env)
	}, checker.Check)
}
