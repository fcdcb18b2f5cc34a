package dist

import (
	"flag"
	"fmt"
)

// ImageFlags registers on fs the flags `make image` and `make release`
// share (checkout, output, repository, version stamp, image platforms) and
// returns what completes o once fs is parsed: the platforms and the
// creation time (SOURCE_DATE_EPOCH).
func ImageFlags(fs *flag.FlagSet, o *ImageOptions, out, defaultVersion, versionHelp string) func() error {
	fs.StringVar(&o.Root, "root", ".", "the nodepool checkout")
	fs.StringVar(&o.Out, "out", "dist", out)
	fs.StringVar(&o.Repository, "repository", "ghcr.io/nodepool-dev/nodepool", "the image's repository; the tag is --version, and a release pins it by digest")
	fs.StringVar(&o.Stamp.Version, "version", defaultVersion, versionHelp)
	fs.StringVar(&o.Stamp.Revision, "revision", "unknown", "the source revision stamped into the binary and the labels")
	fs.StringVar(&o.Stamp.Source, "source", "https://github.com/nodepool-dev/nodepool", "the source repository (org.opencontainers.image.source)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "the image's platforms, comma-separated")
	return func() error {
		var err error
		if o.Platforms, err = ParsePlatforms(*platforms); err != nil {
			return fmt.Errorf("--platforms: %w", err)
		}
		o.Stamp.Created, err = CreatedFromEnv()
		return err
	}
}
