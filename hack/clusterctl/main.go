// Command clusterctl writes nodepool as a clusterctl provider repository on
// disk, the layout of clusterctl's file:// repositories, for `clusterctl
// init --addon nodepool` without a published release (`make
// clusterctl-repository`; test/clusterctl runs it):
//
//	<out>/addon-nodepool/<version>/addon-components.yaml
//	<out>/addon-nodepool/<version>/metadata.yaml
//
// and prints the clusterctl.yaml entry that names it. A release ships the
// same two files (`make release`).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"nodepool.dev/nodepool/hack/internal/dist"
)

func main() {
	root := flag.String("root", ".", "the nodepool checkout")
	out := flag.String("out", "dist/clusterctl-repository", "the repository's folder")
	version := flag.String("version", "v0.1.0", "the provider version (a series of metadata.yaml)")
	image := flag.String("image", "ghcr.io/nodepool-dev/nodepool:latest", "the image both Deployments run (clusterctl's images: "+dist.ClusterctlImageComponent+" moves it)")
	flag.Parse()
	dir, err := filepath.Abs(filepath.Join(*out, "addon-nodepool", *version))
	if err != nil {
		fail(err)
	}
	comps, err := dist.ClusterctlComponents(*root, *image)
	if err != nil {
		fail(err)
	}
	meta, err := dist.ClusterctlMetadata(*root, *version)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	for name, b := range map[string][]byte{dist.ClusterctlComponentsFile: comps, dist.ClusterctlMetadataFile: meta} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			fail(err)
		}
	}
	fmt.Printf("providers:\n  - name: nodepool\n    type: AddonProvider\n    url: file://%s\n", filepath.Join(dir, dist.ClusterctlComponentsFile))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "clusterctl:", err)
	os.Exit(1)
}
