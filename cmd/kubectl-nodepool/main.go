// Command kubectl-nodepool is the kubectl plugin of nodepool (`kubectl
// nodepool ...`): rollout status, history, undo, restart, pause, resume and
// apply-pending, diff, plan and fleet. The nodepool binary is the same
// program when it runs under the name kubectl-nodepool.
package main

import "nodepool.dev/nodepool/internal/cli"

func main() { cli.Main() }
