// Package version tells which build of nodepool is running: the version and
// source revision stamped at link time (make build, make image and make
// release set them with -ldflags -X), else what the Go toolchain recorded,
// and the Go version. `nodepool version` prints them and the
// nodepool_build_info metric carries them.
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// Set at link time:
//
//	-X nodepool.dev/nodepool/internal/version.version=v0.1.0
//	-X nodepool.dev/nodepool/internal/version.revision=<git commit>
var (
	version  string
	revision string
)

// Info describes the running binary.
type Info struct {
	// Version is the release (v0.1.0), or the module version `go install`
	// recorded, or "dev".
	Version string `json:"version"`
	// Revision is the source commit, or "unknown".
	Revision string `json:"revision"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns what is known about the running binary.
func Get() Info {
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromBuildInfo(info, bi)
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// fromBuildInfo fills what the linker flags left empty from the build
// information the Go toolchain embeds.
func fromBuildInfo(info Info, bi *debug.BuildInfo) Info {
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Revision == "" {
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if info.Revision != "" && modified {
			info.Revision += "-dirty"
		}
	}
	return info
}

// String is the text `nodepool version` prints.
func (i Info) String() string {
	return fmt.Sprintf("version:  %s\nrevision: %s\ngo:       %s\nplatform: %s\n", i.Version, i.Revision, i.GoVersion, i.Platform)
}

// NewCommand returns the `version` subcommand, for both `nodepool` and
// `kubectl nodepool`.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, source revision and Go version of this binary",
		Long: `Print the version of this build of nodepool (set at build time by make build,
make image and make release), the source revision it was built from and the
Go version, as the nodepool_build_info metric of the controller and the
payload server reports them.`,
		Example: `  nodepool version
  kubectl nodepool version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return write(cmd.OutOrStdout())
		},
	}
}

func write(w io.Writer) error {
	_, err := io.WriteString(w, Get().String())
	return err
}

// NewCollector returns the gauge nodepool_build_info{version, revision,
// goversion} = 1, to register on each metrics registry the binary serves.
func NewCollector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_build_info",
		Help: "Always 1; its labels name the version, source revision and Go version of the running binary.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(i.Version, i.Revision, i.GoVersion).Set(1)
	return g
}
