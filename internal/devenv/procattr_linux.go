package devenv

import "syscall"

// childProcAttr puts a child in its own process group and has the kernel
// kill it if nodepool dies without stopping it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
