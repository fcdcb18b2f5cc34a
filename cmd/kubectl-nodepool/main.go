// Command kubectl-nodepool is the kubectl plugin of nodepool (`kubectl
// nodepool ...`): rollout status, history, undo, restart, pause, resume and
// apply-pending, diff, plan and fleet. It is its own binary, apart from
// the nodepool binary: it links the rollout engine it predicts with, not
// the controller, Cluster API's controllers, the sim or the payload server.
//
// kubectl_complete-nodepool, beside this file, is the script kubectl runs
// to complete the plugin's arguments; make build and the release archives
// ship it with the binary.
package main

import "nodepool.dev/nodepool/internal/cli"

func main() { cli.Main() }
