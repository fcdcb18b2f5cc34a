package dist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// OCIArchiveName is the file of the OCI archive in the output folder.
const OCIArchiveName = "nodepool-image.oci.tar"

// ImageOptions are what BuildImage builds.
type ImageOptions struct {
	// Root is the nodepool checkout.
	Root string
	// Out receives image/ and the docker tarballs; binaries are built
	// under Out/bin/.
	Out string
	// Repository, such as ghcr.io/nodepool-dev/nodepool; the tag is the
	// version.
	Repository string
	Platforms  []Platform
	Stamp      Stamp
}

// ImageResult is what BuildImage wrote.
type ImageResult struct {
	Tag name.Tag
	// Digest of the image index: what a release pins.
	Digest v1.Hash
	// Layout is the OCI image layout folder.
	Layout string
	// OCIArchive is the layout as one tar file (an oci-archive): what
	// `kind load image-archive` and `ctr images import` take to keep the
	// pinned digest, and skopeo copy oci-archive: and podman load read.
	OCIArchive string
	// DockerTarballs, one per platform: `docker save` tarballs for docker
	// load and podman load. Each holds a Docker manifest of its own digest,
	// not the pinned index.
	DockerTarballs []string
	// Binaries by platform.
	Binaries map[Platform]string
	// CompressedBytes is the sum of the distinct blobs of the index.
	CompressedBytes int64
}

// BuildImage builds the binaries and writes the image.
func BuildImage(ctx context.Context, o ImageOptions) (*ImageResult, error) {
	tag, err := name.NewTag(o.Repository+":"+o.Stamp.Version, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("the image name: %w", err)
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	bins, err := BuildAll(ctx, root, filepath.Join(o.Out, "bin"), o.Platforms, o.Stamp)
	if err != nil {
		return nil, err
	}
	idx, images, err := Index(bins, o.Platforms, o.Stamp)
	if err != nil {
		return nil, err
	}
	res := &ImageResult{Tag: tag, Layout: filepath.Join(o.Out, "image"), Binaries: bins}
	if err := WriteLayout(res.Layout, idx, tag); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if res.Digest, err = idx.Digest(); err != nil {
		return nil, err
	}
	layoutFiles, err := dirEntries(res.Layout)
	if err != nil {
		return nil, err
	}
	res.OCIArchive = filepath.Join(o.Out, OCIArchiveName)
	if err := writeArchive(res.OCIArchive, layoutFiles, false, o.Stamp.Created); err != nil {
		return nil, err
	}
	seen := map[v1.Hash]bool{}
	for _, p := range o.Platforms {
		path := filepath.Join(o.Out, fmt.Sprintf("nodepool-image-%s-%s.tar", p.OS, p.Arch))
		if err := WriteDockerTarball(path, tag, images[p]); err != nil {
			return nil, fmt.Errorf("writing the docker tarball for %s: %w", p, err)
		}
		res.DockerTarballs = append(res.DockerTarballs, path)
		layers, err := images[p].Layers()
		if err != nil {
			return nil, err
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				return nil, err
			}
			if !seen[d] {
				seen[d] = true
				sz, err := l.Size()
				if err != nil {
					return nil, err
				}
				res.CompressedBytes += sz
			}
		}
	}
	if err := os.WriteFile(filepath.Join(o.Out, "image.digest"), []byte(res.Digest.String()+"\n"), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}
