package dist

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/util/version"
	kyaml "sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/container"
)

// The files clusterctl reads from a release of an add-on provider
// (`clusterctl init --addon nodepool`).
const (
	ClusterctlComponentsFile = "addon-components.yaml"
	ClusterctlMetadataFile   = "metadata.yaml"
	// ClusterctlComponentsDir is the kustomization of the components:
	// clusterctl installs cert-manager in every management cluster, so it
	// issues the payload server's certificate.
	ClusterctlComponentsDir = "config/cert-manager"
)

// The clusterctl variables of the components, with the defaults a release
// gives them (`${NAME:=default}`: clusterctl reads them from the
// environment or clusterctl.yaml). The image is none: clusterctl reads a
// Deployment's image as an image reference before it processes variables
// (`clusterctl generate provider --describe` processes none), so the
// components name the release's image, and clusterctl's images: setting
// moves it (ClusterctlImageComponent).
const (
	// VarNamespace is nodepool's namespace: every object's, and each
	// mention of it (the controller's args, the certificates' names, the
	// admission policies' usernames). Set it rather than clusterctl's
	// --target-namespace, which moves the objects but not those mentions.
	VarNamespace = "NODEPOOL_NAMESPACE"
	// VarClusterAPIUser is the username of Cluster API's controllers,
	// which the policies on a pool's MachineDeployment and MachineSets let
	// through.
	VarClusterAPIUser = "NODEPOOL_CLUSTER_API_USER"
)

// ClusterctlImageComponent is the provider's name in clusterctl's images:
// setting (clusterctl.yaml), which changes the image's repository:
//
//	images:
//	  addon-nodepool:
//	    repository: mirror.example/platform
const ClusterctlImageComponent = "addon-nodepool"

// The values config/ names, which the variables replace.
const (
	defaultNamespace      = "nodepool-system"
	defaultClusterAPIUser = "system:serviceaccount:capi-system:capi-manager"
)

var namespaceWord = regexp.MustCompile(`\b` + defaultNamespace + `\b`)

// ClusterctlComponents is addon-components.yaml: the kustomize build of
// ClusterctlComponentsDir with the image image, where the namespace and
// Cluster API's username are clusterctl variables that default to what the
// build names.
func ClusterctlComponents(root, image string) ([]byte, error) {
	b, err := Kustomize(root, ClusterctlComponentsDir, image)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(b, []byte("${")) {
		return nil, fmt.Errorf("%s already holds ${: clusterctl would read it as a variable", ClusterctlComponentsDir)
	}
	if err := CheckPinned(b, image); err != nil {
		return nil, fmt.Errorf("%s: %w", ClusterctlComponentsDir, err)
	}
	if _, err := container.ImageFromString(image); err != nil {
		return nil, fmt.Errorf("clusterctl reads the image %q: %w", image, err)
	}
	if !bytes.Contains(b, []byte(defaultClusterAPIUser)) {
		return nil, fmt.Errorf("%s does not name Cluster API's user %s", ClusterctlComponentsDir, defaultClusterAPIUser)
	}
	b = bytes.ReplaceAll(b, []byte(defaultClusterAPIUser), fmt.Appendf(nil, "${%s:=%s}", VarClusterAPIUser, defaultClusterAPIUser))
	b = namespaceWord.ReplaceAll(b, fmt.Appendf(nil, "${%s:=%s}", VarNamespace, defaultNamespace))
	return b, nil
}

// ClusterctlMetadata is metadata.yaml of the checkout, checked: it must map
// version's release series to a Cluster API contract.
func ClusterctlMetadata(root, v string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, ClusterctlMetadataFile))
	if err != nil {
		return nil, err
	}
	var m clusterctlv1.Metadata
	if err := kyaml.UnmarshalStrict(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", ClusterctlMetadataFile, err)
	}
	if m.APIVersion != clusterctlv1.GroupVersion.String() || m.Kind != "Metadata" {
		return nil, fmt.Errorf("%s is %s %s, want %s Metadata", ClusterctlMetadataFile, m.APIVersion, m.Kind, clusterctlv1.GroupVersion)
	}
	sv, err := version.ParseSemantic(v)
	if err != nil {
		return nil, err
	}
	s := m.GetReleaseSeriesForVersion(sv)
	if s == nil || s.Contract == "" {
		return nil, fmt.Errorf("%s has no release series %d.%d (with its contract) for %s: add it", ClusterctlMetadataFile, sv.Major(), sv.Minor(), v)
	}
	return b, nil
}

// writeClusterctlProvider writes addon-components.yaml and metadata.yaml
// into out and returns their names.
func writeClusterctlProvider(root, out string, s Stamp, pinned string) ([]string, error) {
	comps, err := ClusterctlComponents(root, pinned)
	if err != nil {
		return nil, err
	}
	meta, err := ClusterctlMetadata(root, s.Version)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# nodepool %s (%s), built from %s: clusterctl init --addon nodepool (variables %s, %s; the image moves with clusterctl's images: %s)\n",
		s.Version, s.Revision, ClusterctlComponentsDir, VarNamespace, VarClusterAPIUser, ClusterctlImageComponent)
	if err := writeFile(filepath.Join(out, ClusterctlComponentsFile), append([]byte(header), comps...)); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(out, ClusterctlMetadataFile), meta); err != nil {
		return nil, err
	}
	return []string{ClusterctlComponentsFile, ClusterctlMetadataFile}, nil
}
