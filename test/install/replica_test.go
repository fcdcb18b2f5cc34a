package install

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"nodepool.dev/nodepool/test/process"
)

// A replica is one pod of a shipped Deployment, run as a process of the
// nodepool binary (test/process says what stands in for the pod). The
// Service the controller's --payload-server-url names is dialled by the
// sim's machines as the test's forwarder (main_test.go).
type replica struct {
	*process.Replica
}

// running are the replicas started and not stopped yet, which checkReplicas
// looks at.
var running sync.Map // *replica → struct{}

// runOptions change how a replica starts; the zero value is as shipped.
type runOptions struct {
	// extraArgs are appended to the container's args.
	extraArgs []string
	// dropArgs removes the container's args starting with one of these
	// (an earlier layout's Deployment).
	dropArgs []string
	// noWait returns at once, without waiting for the readiness probe.
	noWait bool
}

// startReplica starts replica name of the shipped Deployment deploy and
// waits until its readiness probe passes; it is stopped (SIGTERM) when the
// test ends.
func startReplica(t *testing.T, deploy, name string, opts runOptions) *replica {
	t.Helper()
	d := deployment(t, deploy)
	p, err := process.Start(context.Background(), d, process.Options{
		Binary: binary, Config: env.Config, Name: name, Dir: filepath.Join(t.TempDir(), name),
		ExtraArgs: opts.extraArgs, DropArgs: opts.dropArgs,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{p}
	t.Logf("started %s: nodepool %s", name, strings.Join(r.Args, " "))
	running.Store(r, struct{}{})
	t.Cleanup(func() {
		if err := r.Problem(); err != nil {
			t.Error(err)
		}
		r.stop()
		if t.Failed() {
			t.Logf("log of %s (last lines):\n%s", name, r.Log.Tail(60))
		}
	})
	if !opts.noWait {
		r.waitReady(t, d.Spec.Template.Spec.Containers[0].ReadinessProbe)
	}
	return r
}

// waitReady polls the readiness probe's HTTP GET until it answers 200.
func (r *replica) waitReady(t *testing.T, probe *corev1.Probe) {
	t.Helper()
	if err := r.WaitReady(probe, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// serviceAccountConfig reaches the API server as ServiceAccount
// namespace/name, as the processes do.
func serviceAccountConfig(t *testing.T, namespace, name string) *rest.Config {
	t.Helper()
	cfg, err := process.ServiceAccountConfig(context.Background(), env.Config, namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// kill ends the process at once (SIGKILL), as a node failure does.
func (r *replica) kill() {
	r.Kill()
	running.Delete(r)
}

// stop asks the process to end (SIGTERM), as the kubelet does, and kills it
// after the pod's grace period.
func (r *replica) stop() {
	r.Stop()
	running.Delete(r)
}

// checkReplicas fails the test if a running replica exited or was refused
// by RBAC.
func checkReplicas(t testing.TB) {
	t.Helper()
	running.Range(func(k, _ any) bool {
		if err := k.(*replica).Problem(); err != nil {
			t.Fatal(err)
		}
		return true
	})
}
