package main

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"nodepool.dev/nodepool/hack/internal/dist"
	"nodepool.dev/nodepool/internal/k8sbin"

	// The test builds cmd/nodepool: importing what it is built from makes
	// go test's cache notice when it changes.
	_ "nodepool.dev/nodepool/internal/cli"
	_ "nodepool.dev/nodepool/internal/version"
)

// The image as `make image` builds it: an OCI layout with an index for
// linux/amd64 and linux/arm64, each running /nodepool as a non-root user,
// labelled with the version; the amd64 binary from its layer prints that
// version.
func TestImage(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	platforms := []dist.Platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}}
	stamp := dist.Stamp{Version: "v0.0.0-test.1", Revision: "0123456789abcdef", Source: "https://example.com/nodepool", Created: time.Unix(1700000000, 0).UTC()}
	out := t.TempDir()
	start := time.Now()
	res, err := dist.BuildImage(context.Background(), dist.ImageOptions{
		Root: root, Out: out, Repository: "registry.example/nodepool", Platforms: platforms, Stamp: stamp,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s@%s (%.1f MiB compressed) in %s", res.Tag, res.Digest, float64(res.CompressedBytes)/(1<<20), time.Since(start).Round(time.Second))

	// The layout, read back as any OCI tool reads it.
	lp, err := layout.FromPath(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json holds %d manifests, want the one image index", len(topManifest.Manifests))
	}
	desc := topManifest.Manifests[0]
	if desc.MediaType != types.OCIImageIndex || desc.Digest != res.Digest {
		t.Errorf("index.json names %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIImageIndex, res.Digest)
	}
	if got := desc.Annotations[dist.LabelRefName]; got != stamp.Version {
		t.Errorf("ref name %q, want %q", got, stamp.Version)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the image index does not validate: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	var amd64 v1.Image
	for _, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Errorf("a manifest of the index has platform %v", m.Platform)
			continue
		}
		archs = append(archs, m.Platform.Architecture)
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, img, m.Platform.Architecture, stamp)
		if m.Platform.Architecture == "amd64" {
			amd64 = img
		}
	}
	slices.Sort(archs)
	if !slices.Equal(archs, []string{"amd64", "arm64"}) {
		t.Fatalf("the index is for %v, want amd64 and arm64", archs)
	}

	// The docker tarball of each platform loads.
	for _, path := range res.DockerTarballs {
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(filepath.Base(path), "-"+cfg.Architecture+".tar") {
			t.Errorf("%s holds the image for %s", path, cfg.Architecture)
		}
	}

	// The OCI archive, what kind load image-archive imports, is the layout:
	// its index.json names the pinned index.
	if got := ociArchiveIndex(t, res.OCIArchive); got != res.Digest {
		t.Errorf("%s names the index %s, want the pinned %s", filepath.Base(res.OCIArchive), got, res.Digest)
	}

	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("running the amd64 binary needs linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	bin := extract(t, amd64, "nodepool")
	outb, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, outb)
	}
	for _, want := range []string{"version:  " + stamp.Version, "revision: " + stamp.Revision, "go:       go1.", "platform: linux/amd64"} {
		if !strings.Contains(string(outb), want) {
			t.Errorf("the image's binary printed no %q:\n%s", want, outb)
		}
	}
}

func checkConfig(t *testing.T, img v1.Image, arch string, stamp dist.Stamp) {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %s (%v)", arch, mt, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User == "" || c.User == "0" || strings.HasPrefix(c.User, "0:") || c.User == "root" {
		t.Errorf("%s: runs as %q, want a non-root user", arch, c.User)
	}
	if c.User != dist.User {
		t.Errorf("%s: user %q, want %q", arch, c.User, dist.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/nodepool"}) || len(c.Cmd) != 0 {
		t.Errorf("%s: entrypoint %q cmd %q, want [/nodepool] and none", arch, c.Entrypoint, c.Cmd)
	}
	for k, want := range map[string]string{
		dist.LabelVersion: stamp.Version, dist.LabelRevision: stamp.Revision, dist.LabelSource: stamp.Source,
		dist.LabelLicenses: "Apache-2.0",
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("%s: label %s=%q, want %q", arch, k, got, want)
		}
	}
	if cfg.Architecture != arch || cfg.OS != "linux" {
		t.Errorf("config says %s/%s, the index %s", cfg.OS, cfg.Architecture, arch)
	}
	if !cfg.Created.Time.Equal(stamp.Created) {
		t.Errorf("%s: created %s, want %s (SOURCE_DATE_EPOCH)", arch, cfg.Created.Time, stamp.Created)
	}
}

// extract writes the file name of img's filesystem to a temporary
// executable.
func extract(t *testing.T, img v1.Image, name string) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("no %s in the image", name)
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") != name {
			continue
		}
		if h.Mode&0o111 == 0 || h.Uid != 0 {
			t.Errorf("/%s has mode %o, owner %d; want executable, owned by root", name, h.Mode, h.Uid)
		}
		path := filepath.Join(t.TempDir(), name)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// ociArchiveIndex reads the image index that the index.json of an OCI
// archive names.
func ociArchiveIndex(t *testing.T, path string) v1.Hash {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("no index.json in %s", path)
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Name != "index.json" {
			continue
		}
		im, err := v1.ParseIndexManifest(tr)
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 {
			t.Fatalf("the index.json of %s names %d manifests, want 1", path, len(im.Manifests))
		}
		return im.Manifests[0].Digest
	}
}
