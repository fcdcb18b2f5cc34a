package cli

import (
	"github.com/spf13/cobra"

	"nodepool.dev/nodepool/internal/version"
)

// newVersionCommand is `kubectl nodepool version`: the text
// `nodepool version` prints, or with -o json|yaml (or a template) the
// version, revision, Go version and platform as fields.
func newVersionCommand(o *Options) *cobra.Command {
	cmd := version.NewCommand()
	cmd.Long += `

-o json or -o yaml prints the same as the fields version, revision, goVersion
and platform; -o jsonpath='{.version}' prints one.`
	cmd.Example = `  kubectl nodepool version
  kubectl nodepool version -o json
  kubectl nodepool version -o jsonpath='{.version}'`
	text := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if o.tabular() {
			return text(cmd, args)
		}
		return o.printStructured(version.Get())
	}
	return cmd
}
