package dist

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Debian 12's skopeo (1.9.3) cannot keep an index whose entries carry
// artifactType: `skopeo copy --all --preserve-digests` of the layout
// fails, and without --preserve-digests the pushed index is not the one a
// release pins. The index names each image by media type, digest, size
// and platform only.
func TestTheIndexEntriesCarryNoArtifactType(t *testing.T) {
	dir := t.TempDir()
	platforms := []Platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}}
	bins := map[Platform]string{}
	for _, p := range platforms {
		bins[p] = filepath.Join(dir, p.Arch)
		if err := os.WriteFile(bins[p], []byte("#!/bin/sh\necho "+p.Arch+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	idx, _, err := Index(bins, platforms, Stamp{Version: "v0.0.0-test.1", Revision: "r", Source: "https://example.com/nodepool", Created: time.Unix(1700000000, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("the index has %d entries, want %d", len(im.Manifests), len(platforms))
	}
	for _, m := range im.Manifests {
		if m.ArtifactType != "" {
			t.Errorf("the entry of %s carries artifactType %q", m.Platform, m.ArtifactType)
		}
		if _, err := idx.Image(m.Digest); err != nil {
			t.Errorf("the image of %s: %v", m.Platform, err)
		}
	}
	if got := im.Annotations[LabelLicenses]; got != "Apache-2.0" {
		t.Errorf("the index is annotated %s=%q, want Apache-2.0", LabelLicenses, got)
	}
}
