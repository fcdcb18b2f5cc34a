// Command release writes a nodepool release into one folder (`make release
// VERSION=v0.1.0` runs it):
//
//	nodepool.yaml                  config/default, the image pinned by digest
//	nodepool-cert-manager.yaml     config/cert-manager, the same plus the payload server's certificate
//	addon-components.yaml          the clusterctl add-on provider's components (config/cert-manager, the image pinned by digest)
//	metadata.yaml                  its clusterctl metadata: release series → Cluster API contract
//	nodepool-<version>.tgz         the Helm chart (charts/nodepool), the image pinned by digest, with LICENSE
//	nodepool-image.oci.tar         the image (an OCI layout: kind load image-archive, skopeo copy oci-archive:, podman load)
//	nodepool-image-linux-*.tar     the image per platform (docker load; its digest is not the pinned one)
//	kubectl-nodepool_*_*.tar.gz    the kubectl plugin for linux and darwin, amd64 and arm64, with LICENSE
//	krew/nodepool.yaml             the krew plugin manifest of those archives
//	checksums.txt                  SHA-256 of all of the above (sha256sum -c checksums.txt)
//
// Kustomize and Helm run as libraries (sigs.k8s.io/kustomize/api/krusty,
// helm.sh/helm/v4), the image is built with go-containerregistry: nothing
// is downloaded but Go modules.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"nodepool.dev/nodepool/hack/internal/dist"
)

func main() {
	var o dist.ReleaseOptions
	im := &o.Image
	complete := dist.ImageFlags(flag.CommandLine, im, "where the release goes", "", "the release, such as v0.1.0 (required)")
	flag.StringVar(&o.DownloadURL, "download-url", "", "where the assets are published, for the krew manifest (default <source>/releases/download/<version>)")
	pluginPlatforms := flag.String("plugin-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "the kubectl plugin's platforms")
	flag.Parse()
	if err := complete(); err != nil {
		fail(err)
	}
	var err error
	if o.PluginPlatforms, err = dist.ParsePlatforms(*pluginPlatforms); err != nil {
		fail(fmt.Errorf("--plugin-platforms: %w", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, err := dist.Release(ctx, o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("release %s in %s (%.0fs): image %s (%.1f MiB compressed)\n",
		im.Stamp.Version, im.Out, time.Since(start).Seconds(), res.Pinned, float64(res.Image.CompressedBytes)/(1<<20))
	for _, f := range append(res.Files, "checksums.txt") {
		fmt.Printf("  %s\n", f)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}
