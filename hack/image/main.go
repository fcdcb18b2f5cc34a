// Command image builds the OCI image of nodepool offline, with
// go-containerregistry: no Docker daemon, no registry, no base image
// (scratch plus /etc/passwd). `make image` runs it:
//
//	go run ./hack/image --version v0.1.0 --revision $(git rev-parse HEAD) --out dist
//
// It writes <out>/image, an OCI image layout holding one index for every
// --platforms; <out>/nodepool-image.oci.tar, that layout as one file, for
// kind load image-archive (containerd imports it with the pinned digest);
// and <out>/nodepool-image-<os>-<arch>.tar, a `docker save` tarball per
// platform for docker load and podman load, whose Docker manifest has a
// digest of its own.
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
	complete := dist.ImageFlags(flag.CommandLine, &o, "where the image goes", "dev", "the version stamped into the binary and the labels")
	flag.Parse()
	if err := complete(); err != nil {
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
		res.Tag, res.Digest, o.Platforms, float64(res.CompressedBytes)/(1<<20), res.Layout, time.Since(start).Seconds())
	fmt.Printf("  %s (kind load image-archive)\n", res.OCIArchive)
	for _, t := range res.DockerTarballs {
		fmt.Printf("  %s\n", t)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}
