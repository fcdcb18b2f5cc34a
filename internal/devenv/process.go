package devenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a child process (etcd, kube-apiserver) whose output goes to a
// log file in the data dir.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // set when done is closed
}

// startProcess starts path with args, output appended to logPath, and
// records its pid in pidPath. The child runs in its own process group, so a
// Ctrl-C in the terminal reaches only nodepool, which stops its controllers
// before the API server and etcd; on Linux the kernel also kills it if
// nodepool dies (even by SIGKILL), and stopStale catches what that misses.
func startProcess(name, path string, args []string, logPath, pidPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	fmt.Fprintf(logFile, "\n==== %s %s\n", time.Now().Format(time.RFC3339), path)
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := spawn(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("recording the pid of %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// spawnRequest asks the spawner to start cmd.
type spawnRequest struct {
	cmd  *exec.Cmd
	done chan<- error
}

// spawner starts every child from one goroutine locked to its OS thread
// for the life of the process. On Linux the parent-death signal of a child
// (childProcAttr) fires when the thread that started it exits, not the
// process, and the Go runtime ends a thread when a goroutine locked to it
// returns; started from a thread that never exits, the signal means
// "nodepool died".
var spawner = sync.OnceValue(func() chan<- spawnRequest {
	requests := make(chan spawnRequest)
	go func() {
		// Never unlocked: the goroutine and its thread live as long as
		// the process.
		runtime.LockOSThread()
		for r := range requests {
			r.done <- r.cmd.Start()
		}
	}()
	return requests
})

// spawn starts cmd from the spawner's thread.
func spawn(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	spawner() <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// exited reports whether the process has ended, and why.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// failure describes an unexpected exit with the end of the process's log.
func (p *process) failure() error {
	return fmt.Errorf("%s exited (%v); the end of its log %s:\n%s", p.name, p.err, p.logPath, tail(p.logPath, 15))
}

// stop sends SIGTERM and waits up to timeout, then kills the process.
func (p *process) stop(timeout time.Duration) error {
	if p == nil {
		return nil
	}
	if done, _ := p.exited(); done {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s after SIGTERM and was killed", p.name, timeout)
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(cannot read it: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// stopStale stops a process recorded in pidPath by an earlier run that
// died without stopping it (killed, or crashed), if it still runs with
// dataDir in its command line: nothing else may use the locked data dir.
// It returns what it did, for the terminal, or "".
func stopStale(name, pidPath, dataDir string) string {
	b, err := os.ReadFile(pidPath)
	if err != nil {
		return ""
	}
	defer os.Remove(pidPath)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return ""
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !strings.Contains(string(cmdline), dataDir) {
		return ""
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return ""
	}
	_ = proc.Signal(syscall.SIGTERM)
	for range 100 {
		if proc.Signal(syscall.Signal(0)) != nil {
			return fmt.Sprintf("stopped %s (pid %d) left running by an earlier run", name, pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = proc.Kill()
	return fmt.Sprintf("killed %s (pid %d) left running by an earlier run", name, pid)
}
