// Command image builds the OCI image of nodepool offline, with
// go-containerregistry: no Docker daemon, no registry, no base image
// (scratch plus /etc/passwd). `make image` runs it:
//
//	go run ./hack/image --version v0.1.0 --revision $(git rev-parse HEAD) --out dist
//
// It writes <out>/image, an OCI image layout holding one index for every
// --platforms, and <out>/nodepool-image-<os>-<arch>.tar, a `docker save`
// tarball per platform for docker load, podman load and kind load
// image-archive.
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
	var o dist.ImageOptions
	flag.StringVar(&o.Root, "root", ".", "the nodepool checkout")
	flag.StringVar(&o.Out, "out", "dist", "where the image goes")
	flag.StringVar(&o.Repository, "repository", "ghcr.io/nodepool-dev/nodepool", "the image's repository; the tag is --version")
	flag.StringVar(&o.Stamp.Version, "version", "dev", "the version stamped into the binary and the labels")
	flag.StringVar(&o.Stamp.Revision, "revision", "unknown", "the source revision stamped into the binary and the labels")
	flag.StringVar(&o.Stamp.Source, "source", "https://github.com/nodepool-dev/nodepool", "the source repository (org.opencontainers.image.source)")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "the image's platforms, comma-separated")
	flag.Parse()
	var err error
	if o.Platforms, err = dist.ParsePlatforms(*platforms); err != nil {
		fail(err)
	}
	if o.Stamp.Created, err = dist.CreatedFromEnv(); err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, err := dist.BuildImage(ctx, o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("image %s@%s (%s, %.1f MiB compressed) in %s, built in %.0fs\n",
		res.Tag, res.Digest, *platforms, float64(res.CompressedBytes)/(1<<20), res.Layout, time.Since(start).Seconds())
	for _, t := range res.DockerTarballs {
		fmt.Printf("  %s\n", t)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}
