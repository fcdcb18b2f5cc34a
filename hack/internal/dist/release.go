package dist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// ReleaseOptions are what Release builds.
type ReleaseOptions struct {
	Image ImageOptions
	// PluginPlatforms get a kubectl plugin archive each.
	PluginPlatforms []Platform
	// DownloadURL is where the assets are published, for the krew
	// manifest; "" means <source>/releases/download/<version>.
	DownloadURL string
}

// ReleaseResult is what Release wrote.
type ReleaseResult struct {
	Image *ImageResult
	// Pinned is the image reference the manifests run:
	// <repository>@sha256:<index digest>.
	Pinned string
	// Files are the release assets, relative to the output folder, all
	// listed in its checksums.txt.
	Files []string
}

// releaseVersion is what a release may be called: semver with a "v", as
// krew requires.
var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// Manifests are the install manifests of a release: the kustomization and
// the file it becomes.
var Manifests = []struct{ Dir, File string }{
	{"config/default", "nodepool.yaml"},
	{"config/cert-manager", "nodepool-cert-manager.yaml"},
}

// Release builds the image, the manifests, the clusterctl provider files
// and the Helm chart pinned to its digest, the observability pack (alerts and dashboard), the kubectl plugin
// archives and their krew manifest, and checksums.txt, into o.Image.Out.
func Release(ctx context.Context, o ReleaseOptions) (*ReleaseResult, error) {
	s := o.Image.Stamp
	if !releaseVersion.MatchString(s.Version) {
		return nil, fmt.Errorf("version %q is not a release version such as v0.1.0 (semver with a leading v)", s.Version)
	}
	out := o.Image.Out
	img, err := BuildImage(ctx, o.Image)
	if err != nil {
		return nil, err
	}
	res := &ReleaseResult{Image: img, Pinned: o.Image.Repository + "@" + img.Digest.String()}

	for _, m := range Manifests {
		b, err := Kustomize(o.Image.Root, m.Dir, res.Pinned)
		if err != nil {
			return nil, err
		}
		if err := CheckPinned(b, res.Pinned); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Dir, err)
		}
		header := fmt.Sprintf("# nodepool %s (%s), built from %s: kubectl apply -f %s\n", s.Version, s.Revision, m.Dir, m.File)
		if err := writeFile(filepath.Join(out, m.File), append([]byte(header), b...)); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, m.File)
	}

	files, err := writeClusterctlProvider(o.Image.Root, out, s, res.Pinned) // clusterctl.go
	if err != nil {
		return nil, err
	}
	res.Files = append(res.Files, files...)

	pack, err := writeObservability(o.Image.Root, out, s.Version, s.Revision) // observability.go
	if err != nil {
		return nil, err
	}
	res.Files = append(res.Files, pack...)
	chartFile, err := releaseChart(o.Image, res.Pinned)
	if err != nil {
		return nil, err
	}
	res.Files = append(res.Files, chartFile)

	res.Files = append(res.Files, filepath.Base(img.OCIArchive))
	for _, t := range img.DockerTarballs {
		res.Files = append(res.Files, filepath.Base(t))
	}

	plugins, err := pluginArchives(ctx, o)
	if err != nil {
		return nil, err
	}
	for _, a := range plugins {
		res.Files = append(res.Files, pluginArchiveName(a.Platform))
	}
	download := o.DownloadURL
	if download == "" {
		download = s.Source + "/releases/download/" + s.Version
	}
	for i := range plugins {
		plugins[i].URI = download + "/" + pluginArchiveName(plugins[i].Platform)
	}
	krew, err := krewManifest(s.Version, s.Source, plugins)
	if err != nil {
		return nil, err
	}
	krewPath := filepath.Join("krew", "nodepool.yaml")
	if err := writeFile(filepath.Join(out, krewPath), krew); err != nil {
		return nil, err
	}
	res.Files = append(res.Files, krewPath)
	if err := writeChecksums(out, res.Files); err != nil {
		return nil, err
	}
	return res, nil
}

// pluginArchives builds the plugin (./cmd/kubectl-nodepool, not the
// image's binary) for each plugin platform and writes
// kubectl-nodepool_<os>_<arch>.tar.gz: the binary as kubectl-nodepool, its
// completion script kubectl_complete-nodepool and the checkout's LICENSE.
func pluginArchives(ctx context.Context, o ReleaseOptions) ([]krewArchive, error) {
	// krew (and krew-index) refuse a plugin archive without a license.
	license := filepath.Join(o.Image.Root, "LICENSE")
	if !fileExists(license) {
		return nil, fmt.Errorf("no LICENSE in %s: every plugin archive carries it", o.Image.Root)
	}
	completion := filepath.Join(o.Image.Root, PluginCompletion)
	if !fileExists(completion) {
		return nil, fmt.Errorf("no %s in %s: every plugin archive carries it", PluginCompletion, o.Image.Root)
	}
	extra := []entry{{name: filepath.Base(PluginCompletion), path: completion, mode: 0o755}, {name: "LICENSE", path: license, mode: 0o644}}
	var out []krewArchive
	for _, p := range o.PluginPlatforms {
		bin := filepath.Join(o.Image.Out, "bin", "plugin_"+p.OS+"_"+p.Arch, pluginBinary(p))
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return nil, err
		}
		if err := GoBuildCommand(ctx, o.Image.Root, PluginCommand, p, o.Image.Stamp, bin); err != nil {
			return nil, err
		}
		entries := append([]entry{{name: pluginBinary(p), path: bin, mode: 0o755}}, extra...)
		path := filepath.Join(o.Image.Out, pluginArchiveName(p))
		if err := writeArchive(path, entries, true, o.Image.Stamp.Created); err != nil {
			return nil, err
		}
		sum, err := sha256File(path)
		if err != nil {
			return nil, err
		}
		a := krewArchive{Platform: p, SHA256: sum}
		for _, e := range extra {
			a.Extra = append(a.Extra, e.name)
		}
		out = append(out, a)
	}
	return out, nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// releaseChart packages the Helm chart for the release and checks it as
// it ships: it lints, and its defaults run the pinned image. It returns the
// archive's name in the output folder.
func releaseChart(o ImageOptions, pinned string) (string, error) {
	tgz, err := PackageChart(o, pinned)
	if err != nil {
		return "", fmt.Errorf("helm package %s: %w", ChartDir, err)
	}
	if err := LintChart(tgz, nil); err != nil {
		return "", fmt.Errorf("helm lint %s: %w", tgz, err)
	}
	ch, err := loader.Load(tgz)
	if err != nil {
		return "", err
	}
	b, err := RenderChart(ch, ChartNamespace, nil)
	if err != nil {
		return "", err
	}
	if err := CheckPinned(b, pinned); err != nil {
		return "", fmt.Errorf("%s: %w", tgz, err)
	}
	return filepath.Base(tgz), nil
}
