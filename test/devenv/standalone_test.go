package devenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nodepool.dev/nodepool/internal/k8sbin"
)

// buildNodepool builds cmd/nodepool into a temporary folder.
func buildNodepool(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nodepool")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nodepool")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/nodepool: %v\n%s", err, out)
	}
	return bin
}

// A new user runs the binary anywhere: it carries the CRDs it installs and
// needs no checkout, only the kube-apiserver and etcd binaries. Killed with
// SIGKILL, it takes them along.
func TestDevUpRunsOutsideTheCheckoutAndItsChildrenDieWithIt(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := k8sbin.Dir(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildNodepool(t, root)
	// No go.mod above it, and no NODEPOOL_ASSETS: only --assets-dir says
	// where the control plane binaries are.
	cwd := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, k8sbin.Env+"=") {
			env = append(env, kv)
		}
	}
	dataDir := filepath.Join(cwd, "data")
	ports := freePorts(t, 4)
	args := []string{"dev", "up", "--data-dir", dataDir, "--assets-dir", assets,
		"--apiserver-port", ports[0], "--etcd-port", ports[1], "--etcd-peer-port", ports[2], "--payload-server-port", ports[3],
		"--boot-delay", "0", "--status-interval", "1s"}
	d := startDevUpWithEnv(t, cwd, bin, args, env)

	children := map[string]int{}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		b, err := os.ReadFile(filepath.Join(dataDir, name+".pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if !runs(pid, dataDir) {
			t.Fatalf("%s (pid %d) does not run while dev up is ready", name, pid)
		}
		children[name] = pid
	}
	t.Cleanup(func() {
		for _, pid := range children {
			if runs(pid, dataDir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	deadline := time.Now().Add(time.Minute)
	for name, pid := range children {
		for runs(pid, dataDir) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (pid %d) still runs a minute after dev up was killed with SIGKILL", name, pid)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// runs reports whether pid is a live process (not a zombie) whose command
// line names dataDir, so a reused pid does not count.
func runs(pid int, dataDir string) bool {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil || !strings.Contains(string(cmdline), dataDir) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
