// Package cli is the kubectl plugin `kubectl nodepool`: rollout status,
// history, undo, restart, pause, resume and apply-pending, diff, plan and
// fleet. It reads the cluster through cli-runtime's standard flags and
// predicts with the controller's own observation (internal/observe) and
// rollout engine (internal/rollout), never with a copy of their rules.
package cli
