// Package dist builds what nodepool ships: static binaries stamped with a
// version, the OCI image (with go-containerregistry, no Docker daemon and
// no registry), and the release archives. hack/image and hack/release are
// its commands; `make image` and `make release` run them.
package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// VersionPackage holds the variables the linker stamps.
const VersionPackage = "nodepool.dev/nodepool/internal/version"

// Stamp is what a build carries: `nodepool version` prints it and the image
// labels name it.
type Stamp struct {
	// Version is the release, such as v0.1.0.
	Version string
	// Revision is the source commit.
	Revision string
	// Source is the repository's URL (org.opencontainers.image.source).
	Source string
	// Created is the time written into the image and the archives:
	// SOURCE_DATE_EPOCH (the commit time, from make) when set, else the Unix
	// epoch, so the same sources give the same digests.
	Created time.Time
}

// CreatedFromEnv returns the time of $SOURCE_DATE_EPOCH (seconds), or the
// Unix epoch.
func CreatedFromEnv() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	var sec int64
	if _, err := fmt.Sscan(s, &sec); err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// Platform is a GOOS and GOARCH.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatforms parses "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("platform %q is not <os>/<arch>", f)
		}
		out = append(out, Platform{OS: os, Arch: arch})
	}
	return out, nil
}

// The commands a release builds: the server side (the image's binary) and
// the kubectl plugin, its own smaller binary.
const (
	ServerCommand = "./cmd/nodepool"
	PluginCommand = "./cmd/kubectl-nodepool"
	// PluginCompletion is the script kubectl runs to complete the
	// plugin's arguments; the plugin archives carry it.
	PluginCompletion = "cmd/kubectl-nodepool/kubectl_complete-nodepool"
)

// GoBuild builds ./cmd/nodepool of the module at root for p into out: a
// static binary (no cgo), without local paths (-trimpath), without the
// symbol table, stamped with s.
func GoBuild(ctx context.Context, root string, p Platform, s Stamp, out string) error {
	return GoBuildCommand(ctx, root, ServerCommand, p, s, out)
}

// GoBuildCommand builds the command pkg (./cmd/...) of the module at root
// for p into out, as GoBuild does.
func GoBuildCommand(ctx context.Context, root, pkg string, p Platform, s Stamp, out string) error {
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", VersionPackage, s.Version, VersionPackage, s.Revision)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %v\n%s", pkg, p, err, b)
	}
	return nil
}

// BuildAll builds the binary for each platform into dir/<os>_<arch>/nodepool
// and returns the paths by platform.
func BuildAll(ctx context.Context, root, dir string, platforms []Platform, s Stamp) (map[Platform]string, error) {
	out := map[Platform]string{}
	for _, p := range platforms {
		bin := filepath.Join(dir, p.OS+"_"+p.Arch, "nodepool")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return nil, err
		}
		if err := GoBuild(ctx, root, p, s, bin); err != nil {
			return nil, err
		}
		out[p] = bin
	}
	return out, nil
}
