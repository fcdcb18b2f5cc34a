package dist

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/yaml"
)

// ImageName is the name the shipped Deployments give nodepool's image
// (nodepool:latest); a release replaces it.
const ImageName = "nodepool"

// Kustomize builds the kustomization dir of root's config/ (such as
// "config/default") as `kustomize build` does, in memory, with the image
// nodepool set to image (repository@digest or repository:tag; "" leaves
// it as it is). A Component (config/prometheus) is built as a
// kustomization that names it and nothing else.
func Kustomize(root, dir, image string) ([]byte, error) {
	mem, err := configFS(root)
	if err != nil {
		return nil, err
	}
	target := path.Join("/", filepath.ToSlash(dir))
	if k, err := mem.ReadFile(path.Join(target, "kustomization.yaml")); err == nil && bytes.Contains(k, []byte("\nkind: Component\n")) {
		if err := mem.WriteFile("/component/kustomization.yaml", fmt.Appendf(nil, "components:\n  - ..%s\n", target)); err != nil {
			return nil, err
		}
		target = "/component"
	}
	if image != "" {
		kust := fmt.Sprintf("resources:\n  - ..%s\nimages:\n  - %s\n", target, imageEntry(image))
		if err := mem.WriteFile("/release/kustomization.yaml", []byte(kust)); err != nil {
			return nil, err
		}
		target = "/release"
	}
	opts := krusty.MakeDefaultOptions()
	// The order of `kustomize build` and `kubectl apply -k`: namespaces and
	// CRDs first.
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(mem, target)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m.AsYaml()
}

// configFS is root's config/ (its YAML and JSON files) in memory, at
// /config.
func configFS(root string) (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	config := filepath.Join(root, "config")
	err := filepath.WalkDir(config, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".json")) {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/", filepath.ToSlash(rel)), b)
	})
	return mem, err
}

// imageEntry is the kustomize images entry that sets nodepool to image.
func imageEntry(image string) string {
	if repo, digest, ok := strings.Cut(image, "@"); ok {
		return fmt.Sprintf("{name: %s, newName: %q, digest: %q}", ImageName, repo, digest)
	}
	repo, tag := image, "latest"
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo, tag = image[:i], image[i+1:]
	}
	return fmt.Sprintf("{name: %s, newName: %q, newTag: %q}", ImageName, repo, tag)
}

// Object is the part of a manifest the checks read.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers     []struct{ Image string } `json:"containers"`
				InitContainers []struct{ Image string } `json:"initContainers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// Images are the images of the object's pod template.
func (o Object) Images() []string {
	var out []string
	for _, c := range o.Spec.Template.Spec.InitContainers {
		out = append(out, c.Image)
	}
	for _, c := range o.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

// Decode splits a multi-document YAML stream into objects.
func Decode(stream []byte) ([]Object, error) {
	var out []Object
	for _, doc := range bytes.Split(stream, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var o Object
		if err := kyaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// CheckPinned fails unless every pod template of stream runs image (and
// there is at least one), so a release names no nodepool:latest.
func CheckPinned(stream []byte, image string) error {
	objs, err := Decode(stream)
	if err != nil {
		return err
	}
	var errs []error
	n := 0
	for _, o := range objs {
		for _, img := range o.Images() {
			n++
			if img != image {
				errs = append(errs, fmt.Errorf("%s %s runs %s, not %s", o.Kind, o.Metadata.Name, img, image))
			}
		}
	}
	if n == 0 {
		errs = append(errs, errors.New("no pod template"))
	}
	if bytes.Contains(stream, []byte(ImageName+":latest")) {
		errs = append(errs, errors.New(ImageName+":latest is still named"))
	}
	return errors.Join(errs...)
}

// writeFile writes b to path, creating its folder.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
