package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exitCodeLines are the exit codes of each command (by its path under
// `kubectl nodepool`, "" for the plugin itself) besides 0 and the codes
// every command shares (commonExitCodes); --help lists them.
var exitCodeLines = map[string][]string{
	"":                      {"0 the command succeeded", "1 the rollout cannot proceed or a planned pool is refused (see each command), or a bad flag or input", "2 a rollout stalled, is paused indefinitely or waits for its window (rollout status, fleet rollout status)", "3 --timeout passed (rollout status, fleet rollout status)", "4 plan predicts a drain that blocks; fleet forecast finds a pool that never runs the change"},
	"rollout":               {"0 the command succeeded"},
	"rollout status":        {"0 the rollout completed (or, with --watch=false, the status was printed)", "1 the rollout cannot proceed: it failed, halted, or the pool is invalid", "2 the rollout stalled (no progress for --progress-deadline), is paused indefinitely, or waits for the next maintenance window", "3 --timeout passed before the rollout completed"},
	"rollout history":       {"0 the history (or --revision) was printed", "1 the revision is not recorded, or a bad flag"},
	"rollout undo":          {"0 the pool's spec was restored", "1 refused: a ConfigMap or Secret the revision read changed or is gone (--force overrides), or the revision is not recorded"},
	"rollout restart":       {"0 the restart was requested", "1 a bad flag (such as --outside-windows without --reason)"},
	"rollout pause":         {"0 the pool was paused", "1 a bad flag"},
	"rollout resume":        {"0 the pool was resumed", "1 a bad flag"},
	"rollout apply-pending": {"0 the pending platform changes were requested", "1 nothing pending, or a bad flag"},
	"diff":                  {"0 the differences were printed", "1 a bad flag or value"},
	"plan":                  {"0 the prediction was printed", "1 a pool is refused by the API server or invalid, or an input file cannot be read", "4 a drain of a predicted rollout is predicted to block (1 wins when both apply)"},
	"fleet":                 {"0 the pools were listed", "1 a bad flag"},
	"fleet forecast":        {"0 every pool runs the change within the horizon", "1 an input file cannot be read, or a bad flag", "4 a pool never runs the change without action"},
	"fleet rollout":         {"0 the FleetRollout was created", "1 a bad flag or value (the API server's refusal names the field)"},
	"fleet rollout status":  {"0 the fleet rollout completed (or, with --watch=false, the status was printed)", "1 the fleet rollout halted or was cancelled", "2 the fleet rollout is paused", "3 --timeout passed before it completed"},
	"fleet rollout pause":   {"0 the fleet rollout was paused", "1 a bad flag"},
	"fleet rollout resume":  {"0 the fleet rollout was resumed", "1 a bad flag"},
	"fleet rollout cancel":  {"0 the fleet rollout was cancelled", "1 a bad flag"},
	"version":               {"0 the version was printed", "1 a bad flag"},
}

// commonExitCodes are the codes every command that talks to the cluster
// shares.
var commonExitCodes = []string{
	fmt.Sprintf("%d the API server cannot be reached (or the kubeconfig names none), refuses the credentials or the request (not allowed), or the object named is not found", ExitUnreachable),
}

// commandKey is cmd's path under the plugin: "rollout status".
func commandKey(cmd *cobra.Command) string {
	var parts []string
	for c := cmd; c.HasParent(); c = c.Parent() {
		parts = append([]string{c.Name()}, parts...)
	}
	return strings.Join(parts, " ")
}

// documentExitCodes appends each command's exit codes to its --help.
func documentExitCodes(cmd *cobra.Command) {
	if lines, ok := exitCodeLines[commandKey(cmd)]; ok {
		if commandKey(cmd) != "version" {
			lines = append(append([]string{}, lines...), commonExitCodes...)
		}
		var b strings.Builder
		b.WriteString("\n\nExit codes:\n")
		for _, l := range lines {
			code, text, _ := strings.Cut(l, " ")
			fmt.Fprintf(&b, "  %s  %s\n", code, text)
		}
		cmd.Long = strings.TrimRight(cmd.Long, "\n") + strings.TrimRight(b.String(), "\n")
	}
	for _, c := range cmd.Commands() {
		documentExitCodes(c)
	}
}
