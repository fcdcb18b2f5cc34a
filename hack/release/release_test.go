package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"

	"nodepool.dev/nodepool/hack/internal/dist"
	"nodepool.dev/nodepool/internal/k8sbin"

	// The test builds cmd/nodepool: importing what it is built from makes
	// go test's cache notice when it changes.
	_ "nodepool.dev/nodepool/internal/cli"
	_ "nodepool.dev/nodepool/internal/version"
)

// A release for one platform (the others differ only by GOOS/GOARCH, and
// cost a cross build each): the manifests pin the image the layout holds,
// checksums.txt covers every asset, and the krew manifest names the plugin
// archive by its SHA-256; the plugin in it is kubectl-nodepool.
func TestRelease(t *testing.T) {
	if _, err := dist.Release(context.Background(), dist.ReleaseOptions{Image: dist.ImageOptions{Stamp: dist.Stamp{Version: "latest"}}}); err == nil {
		t.Error("a release called latest was made")
	}
	out, res := testRelease(t)

	// The manifests pin the index the layout holds.
	lp, err := layout.FromPath(res.Image.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := "registry.example/nodepool@" + im.Manifests[0].Digest.String()
	if res.Pinned != want {
		t.Errorf("pinned %s, the layout holds %s", res.Pinned, want)
	}
	for _, m := range dist.Manifests {
		b, err := os.ReadFile(filepath.Join(out, m.File))
		if err != nil {
			t.Fatal(err)
		}
		if err := dist.CheckPinned(b, want); err != nil {
			t.Errorf("%s: %v", m.File, err)
		}
	}

	// The clusterctl components run the pinned image, named as it is (no
	// variable: clusterctl reads it as an image reference).
	comps, err := os.ReadFile(filepath.Join(out, dist.ClusterctlComponentsFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(comps), "image: "+want+"\n"); n != 2 {
		t.Errorf("%s runs %s in %d Deployments, want 2", dist.ClusterctlComponentsFile, want, n)
	}

	// checksums.txt is what sha256sum -c reads, and covers every asset.
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(out, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", sc.Text())
		}
		sums[name] = sum
		if got := sha256Of(t, filepath.Join(out, name)); got != sum {
			t.Errorf("checksums.txt says %s for %s, it is %s", sum, name, got)
		}
	}
	_ = f.Close()
	for _, name := range []string{"nodepool.yaml", "nodepool-cert-manager.yaml", "nodepool-0.0.0-test.1.tgz", "nodepool-image.oci.tar", "nodepool-image-linux-amd64.tar", "kubectl-nodepool_linux_amd64.tar.gz", "krew/nodepool.yaml",
		dist.Observability.Manifest, dist.Observability.Rules, dist.Observability.Dashboard, dist.ClusterctlComponentsFile, dist.ClusterctlMetadataFile} {
		if sums[name] == "" {
			t.Errorf("checksums.txt has no %s", name)
		}
	}

	// The krew manifest.
	var plugin struct {
		Kind string
		Spec struct {
			Version   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				URI      string
				SHA256   string
				Bin      string
				Files    []struct{ From, To string }
			}
			Caveats string
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "krew", "nodepool.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin.Kind != "Plugin" || plugin.Spec.Version != "v0.0.0-test.1" || len(plugin.Spec.Platforms) != 1 {
		t.Fatalf("krew manifest:\n%s", b)
	}
	p := plugin.Spec.Platforms[0]
	if p.SHA256 != sums["kubectl-nodepool_linux_amd64.tar.gz"] || p.Bin != "kubectl-nodepool" ||
		p.URI != "https://example.com/nodepool/releases/download/v0.0.0-test.1/kubectl-nodepool_linux_amd64.tar.gz" ||
		p.Selector.MatchLabels["os"] != "linux" || p.Selector.MatchLabels["arch"] != "amd64" {
		t.Errorf("krew platform %+v", p)
	}
	// krew installs the completion script beside the plugin; the caveats
	// say how to put it on the PATH.
	installs := map[string]bool{}
	for _, f := range p.Files {
		installs[f.From] = true
	}
	if !installs["kubectl-nodepool"] || !installs["kubectl_complete-nodepool"] || !installs["LICENSE"] || !strings.Contains(plugin.Spec.Caveats, "kubectl_complete-nodepool") {
		t.Errorf("the krew manifest installs %v with caveats %q: want kubectl-nodepool, kubectl_complete-nodepool and LICENSE, and how to link the completion", p.Files, plugin.Spec.Caveats)
	}

	// The plugin archive holds kubectl-nodepool, which runs as the plugin.
	if runtime.GOOS != host.OS || runtime.GOARCH != host.Arch {
		t.Skipf("running the plugin needs %s", host)
	}
	bin := untar(t, filepath.Join(out, "kubectl-nodepool_linux_amd64.tar.gz"), "kubectl-nodepool")
	outb, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(outb), "version:  v0.0.0-test.1") {
		t.Errorf("kubectl-nodepool version: %v\n%s", err, outb)
	}
	if outb, _ := exec.Command(bin, "--help").CombinedOutput(); !strings.Contains(string(outb), "kubectl nodepool") {
		t.Errorf("kubectl-nodepool does not run as the plugin:\n%s", outb)
	}
	// It is the plugin's own binary, not the server's under another name.
	if outb, err := exec.Command(bin, "controller", "--help").CombinedOutput(); err == nil {
		t.Errorf("kubectl-nodepool runs the controller: it is the server's binary:\n%s", outb)
	}
	server, plug := fileSize(t, res.Image.Binaries[host]), fileSize(t, bin)
	t.Logf("kubectl-nodepool %.1f MiB, nodepool %.1f MiB", float64(plug)/(1<<20), float64(server)/(1<<20))
	if plug >= server {
		t.Errorf("kubectl-nodepool is %d bytes, no smaller than nodepool's %d", plug, server)
	}
	// The completion script kubectl runs hands the words to the plugin's
	// __complete.
	script := untar(t, filepath.Join(out, "kubectl-nodepool_linux_amd64.tar.gz"), "kubectl_complete-nodepool")
	complete := exec.Command(script, "fleet", "--sort-by", "drift")
	complete.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if outb, err := complete.Output(); err != nil || string(outb) != "drift\ndrift-age\n:4\n" {
		t.Errorf("kubectl_complete-nodepool fleet --sort-by drift: %v\n%s", err, outb)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// host is the platform of the test release: the others differ only by
// GOOS/GOARCH, and cost a cross build each.
var host = dist.Platform{OS: "linux", Arch: "amd64"}

// The release the tests of this package read, built once into a folder
// that TestMain removes.
var (
	releaseOnce sync.Once
	releaseDir  string
	releaseRes  *dist.ReleaseResult
	releaseErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseDir != "" {
		_ = os.RemoveAll(releaseDir)
	}
	os.Exit(code)
}

// testRelease builds (once) the release for host into a temporary folder
// and returns the folder and what Release wrote.
func testRelease(t *testing.T) (string, *dist.ReleaseResult) {
	t.Helper()
	releaseOnce.Do(func() {
		root, err := k8sbin.RepoRoot()
		if err != nil {
			releaseErr = err
			return
		}
		if releaseDir, releaseErr = os.MkdirTemp("", "nodepool-release-test-"); releaseErr != nil {
			return
		}
		releaseRes, releaseErr = dist.Release(context.Background(), dist.ReleaseOptions{
			Image: dist.ImageOptions{
				Root: root, Out: releaseDir, Repository: "registry.example/nodepool", Platforms: []dist.Platform{host},
				Stamp: dist.Stamp{Version: "v0.0.0-test.1", Revision: "0123456789abcdef", Source: "https://example.com/nodepool", Created: time.Unix(1700000000, 0).UTC()},
			},
			PluginPlatforms: []dist.Platform{host},
		})
	})
	if releaseErr != nil {
		t.Fatalf("the test release: %v", releaseErr)
	}
	return releaseDir, releaseRes
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// untar writes the file name of a .tar.gz to a temporary folder; it must
// be executable.
func untar(t *testing.T, archive, name string) string {
	t.Helper()
	h, b := tarGzEntry(t, archive, name)
	if h.Mode&0o111 == 0 {
		t.Errorf("%s in %s is not executable (mode %o)", name, archive, h.Mode)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// tarGzEntry returns the header and contents of the file name in a .tar.gz.
func tarGzEntry(t *testing.T, archive, name string) (*tar.Header, []byte) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("no %s in %s", name, archive)
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return h, b
		}
	}
}
