package dist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	release "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/yaml"
)

// ChartDir is nodepool's Helm chart in the checkout.
const ChartDir = "charts/nodepool"

// ChartNamespace is the namespace the chart is rendered in when not told:
// the release manifest's.
const ChartNamespace = "nodepool-system"

// LoadChart loads the chart of root's checkout.
func LoadChart(root string) (*chart.Chart, error) {
	return loader.LoadDir(filepath.Join(root, ChartDir))
}

// LintChart runs helm lint on the chart at path (a folder or a .tgz) with
// vals, strictly: a warning fails as an error does.
func LintChart(path string, vals map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = ChartNamespace
	res := l.Run([]string{path}, vals)
	var errs []error
	for _, m := range res.Messages {
		if m.Severity >= 2 { // support.WarningSev
			errs = append(errs, fmt.Errorf("%s", m))
		}
	}
	if len(errs) == 0 {
		errs = res.Errors
	}
	return errors.Join(errs...)
}

// RenderChart renders ch as `helm template nodepool <chart>
// --namespace ns --include-crds` does, with vals over its defaults, and
// returns the manifest (objects separated by ---).
func RenderChart(ch *chart.Chart, ns string, vals map[string]any) ([]byte, error) {
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	in := action.NewInstall(cfg)
	in.DryRunStrategy = action.DryRunClient
	in.ReleaseName = "nodepool"
	in.Namespace = ns
	in.Replace = true
	in.IncludeCRDs = true
	kv, err := common.ParseKubeVersion("v1.36.3")
	if err != nil {
		return nil, err
	}
	in.KubeVersion = kv
	if vals == nil {
		vals = map[string]any{}
	}
	r, err := in.Run(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("helm template: %w", err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm template gave a %T", r)
	}
	return []byte(rel.Manifest), nil
}

// PackageChart writes the chart of o's checkout as `helm package` does,
// into o.Out/nodepool-<version without v>.tgz, for the release: version
// and appVersion are the release's, the image is pinned (repository@digest)
// in its values.yaml, the checkout's LICENSE is in it, and every file has
// the release's time, so one commit makes one archive. It returns the
// archive's path.
func PackageChart(o ImageOptions, pinned string) (string, error) {
	repo, digest, ok := strings.Cut(pinned, "@")
	if !ok {
		return "", fmt.Errorf("image %q is not pinned by digest", pinned)
	}
	ch, err := LoadChart(o.Root)
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = strings.TrimPrefix(o.Stamp.Version, "v")
	ch.Metadata.AppVersion = o.Stamp.Version
	var values *common.File
	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			values = f
		}
	}
	if values == nil {
		return "", fmt.Errorf("%s has no %s", ChartDir, chartutil.ValuesfileName)
	}
	if values.Data, err = pinValues(values.Data, repo, digest); err != nil {
		return "", err
	}
	if err := yaml.Unmarshal(values.Data, &ch.Values); err != nil {
		return "", err
	}
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return "", fmt.Errorf("the chart carries LICENSE: %w", err)
	}
	ch.Files = append(ch.Files, &common.File{Name: "LICENSE", Data: license})
	stampTimes(ch, o.Stamp.Created)
	return chartutil.Save(ch, o.Out)
}

// pinValues sets the image's repository and digest in values.yaml, keeping
// its comments: each line must be there once, as the chart writes it.
func pinValues(b []byte, repo, digest string) ([]byte, error) {
	for _, r := range []struct{ key, value string }{{"repository", repo}, {"digest", digest}} {
		var found []int
		lines := bytes.Split(b, []byte("\n"))
		for i, l := range lines {
			if strings.HasPrefix(string(l), "  "+r.key+": ") && i > 0 && inImage(lines[:i]) {
				found = append(found, i)
			}
		}
		if len(found) != 1 {
			return nil, fmt.Errorf("%s/values.yaml: image.%s is on %d lines, want 1", ChartDir, r.key, len(found))
		}
		lines[found[0]] = []byte(fmt.Sprintf("  %s: %q", r.key, r.value))
		b = bytes.Join(lines, []byte("\n"))
	}
	return b, nil
}

// inImage reports whether the line after lines is inside the top-level
// image: block.
func inImage(lines [][]byte) bool {
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if len(l) > 0 && l[0] != ' ' && l[0] != '#' {
			return string(l) == "image:"
		}
	}
	return false
}

// stampTimes gives every file of ch the time t, and ch's archive with it.
func stampTimes(ch *chart.Chart, t time.Time) {
	ch.ModTime, ch.SchemaModTime = t, t
	if ch.Lock != nil {
		ch.Lock.Generated = t
	}
	for _, fs := range [][]*common.File{ch.Raw, ch.Templates, ch.Files} {
		for _, f := range fs {
			f.ModTime = t
		}
	}
}
