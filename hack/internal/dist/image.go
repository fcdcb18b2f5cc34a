package dist

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs as this user and group: "nonroot" of distroless images.
const (
	UID        = 65532
	User       = "65532:65532"
	Entrypoint = "/nodepool"
)

// OCI annotation and label keys.
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelRefName  = "org.opencontainers.image.ref.name"
	LabelLicenses = "org.opencontainers.image.licenses"
	// containerd names an imported image after it.
	annotationContainerdName = "io.containerd.image.name"
)

// License is the SPDX identifier of the license in LICENSE at the
// checkout's root.
const License = "Apache-2.0"

// Labels are the image's labels, also the annotations of its manifests.
func (s Stamp) Labels() map[string]string {
	return map[string]string{
		LabelTitle:    "nodepool",
		LabelVersion:  s.Version,
		LabelRevision: s.Revision,
		LabelSource:   s.Source,
		LabelCreated:  s.Created.Format(time.RFC3339),
		LabelLicenses: License,
	}
}

// file is one entry of a layer: a folder, contents, or the file at path.
type file struct {
	name     string
	mode     int64
	uid      int // and gid
	dir      bool
	contents []byte
	path     string
}

// baseFiles are the whole base of the image (it starts from scratch): the
// user it runs as, for tools that resolve it by name, and its home.
var baseFiles = []file{
	{name: "etc/", mode: 0o755, dir: true},
	{name: "etc/passwd", mode: 0o644, contents: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
	{name: "etc/group", mode: 0o644, contents: []byte("root:x:0:\nnonroot:x:65532:\n")},
	{name: "etc/nsswitch.conf", mode: 0o644, contents: []byte("hosts: files dns\n")},
	{name: "home/", mode: 0o755, dir: true},
	{name: "home/nonroot/", mode: 0o700, uid: UID, dir: true},
	{name: "tmp/", mode: 0o1777, dir: true},
}

// layer makes a gzip-compressed OCI layer of files. archive/tar writes the
// entries; go-containerregistry compresses, digests and stores it.
func layer(files []file, modTime time.Time) (v1.Layer, error) {
	opener := func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTar(pw, files, modTime)) }()
		return pr, nil
	}
	return tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func writeTar(w io.Writer, files []file, modTime time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: modTime, Format: tar.FormatPAX}
		var body io.Reader
		switch {
		case f.dir:
			h.Typeflag = tar.TypeDir
		case f.path != "":
			fh, err := os.Open(f.path)
			if err != nil {
				return err
			}
			defer fh.Close()
			st, err := fh.Stat()
			if err != nil {
				return err
			}
			h.Typeflag, h.Size, body = tar.TypeReg, st.Size(), fh
		default:
			h.Typeflag, h.Size, body = tar.TypeReg, int64(len(f.contents)), bytes.NewReader(f.contents)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// Image assembles the image of binary for p: scratch, the base layer, the
// binary layer as /nodepool, run as 65532:65532.
func Image(binary string, p Platform, s Stamp) (v1.Image, error) {
	base, err := layer(baseFiles, s.Created)
	if err != nil {
		return nil, err
	}
	bin, err := layer([]file{{name: "nodepool", mode: 0o755, path: binary}}, s.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Arch,
		OS:           p.OS,
		Created:      v1.Time{Time: s.Created},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{Entrypoint},
			WorkingDir: "/home/nonroot",
			Env:        []string{"HOME=/home/nonroot"},
			Labels:     s.Labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.Created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "nodepool base: /etc/passwd and /etc/group with user nonroot (65532), /home/nonroot, /tmp", Comment: "hack/image"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: created, CreatedBy: "nodepool " + s.Version + " (" + p.String() + ") as /nodepool", Comment: "hack/image"}},
	)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, s.Labels()).(v1.Image), nil
}

// Index is the multi-platform image of binaries.
func Index(binaries map[Platform]string, platforms []Platform, s Stamp) (v1.ImageIndex, map[Platform]v1.Image, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[Platform]v1.Image{}
	for _, p := range platforms {
		img, err := Image(binaries[p], p, s)
		if err != nil {
			return nil, nil, fmt.Errorf("the image for %s: %w", p, err)
		}
		images[p] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        withoutArtifactType{img},
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}},
		})
	}
	return mutate.Annotations(idx, s.Labels()).(v1.ImageIndex), images, nil
}

// withoutArtifactType is an image whose descriptor in an index has no
// artifactType. go-containerregistry gives every image manifest's entry
// one (its config's media type), and skopeo before 1.10 cannot write an
// index whose entries carry it: `skopeo copy --all --preserve-digests`
// then fails ("Manifest list must be converted ... Instructed to preserve
// digests"), and without --preserve-digests the pushed index has another
// digest than the one a release pins. An image's artifactType is optional
// (the OCI image spec sets it only for artifacts), so leave it out.
type withoutArtifactType struct{ v1.Image }

// Descriptor is what partial.Descriptor, and so mutate.AppendManifests,
// takes as the image's entry.
func (i withoutArtifactType) Descriptor() (*v1.Descriptor, error) {
	d, err := partial.Descriptor(i.Image)
	if err != nil {
		return nil, err
	}
	d.ArtifactType = ""
	return d, nil
}

// WriteLayout writes idx as the OCI image layout dir (replacing it), named
// tag.Identifier() (org.opencontainers.image.ref.name) and tag
// (io.containerd.image.name): skopeo copy oci:<dir>:<version>, crane push
// --index <dir>, or an oci-archive of it for podman load.
func WriteLayout(dir string, idx v1.ImageIndex, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		LabelRefName:             tag.TagStr(),
		annotationContainerdName: tag.Name(),
	}))
	if err != nil {
		return err
	}
	// go-containerregistry writes some files 0600 and some 0755: make all
	// of them readable data.
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o644)
	})
}

// WriteDockerTarball writes one platform's image as a `docker save`
// tarball tagged tag: docker load, podman load and kind load image-archive
// read it.
func WriteDockerTarball(path string, tag name.Tag, img v1.Image) error {
	return tarball.WriteToFile(path, tag, img)
}
