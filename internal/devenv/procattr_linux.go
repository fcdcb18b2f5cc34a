package devenv

import "syscall"

// childProcAttr puts a child in its own process group and has the kernel
// kill it when nodepool dies without stopping it (kill -9 included).
// SIGKILL, not SIGTERM: kube-apiserver's graceful shutdown waits for etcd,
// which is going away too, and kept it running for over a minute. The
// signal is sent when the thread that started the child exits, so children
// are started by spawn, from a thread that lives as long as the process.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
