package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nodepool.dev/nodepool/internal/k8sbin"
)

// The version of krew whose validator krew-index runs on a plugin manifest.
const krewVersion = "v0.4.3"

// krew's own validator accepts the release's krew manifest and installs
// the plugin from its archive, as krew-index does before it takes a
// release: the structure, every platform's selector, and `kubectl krew
// install`, which downloads the archive, checks its SHA-256, extracts the
// files the manifest names and requires a license among them. The archive
// is served from this machine: the manifest tested is the release's, with
// each download URL's folder moved to that server (the file names and
// checksums are the release's).
func TestKrewValidatesAndInstallsThePlugin(t *testing.T) {
	out, _ := testRelease(t)
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}

	archive := filepath.Join(out, "kubectl-nodepool_linux_amd64.tar.gz")
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if got := licenseIn(t, archive); !bytes.Equal(got, license) {
		t.Errorf("the LICENSE in %s is not the checkout's (%d bytes, want %d)", filepath.Base(archive), len(got), len(license))
	}

	srv := httptest.NewServer(http.FileServer(http.Dir(out)))
	defer srv.Close()
	manifest, err := os.ReadFile(filepath.Join(out, "krew", "nodepool.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const published = "https://example.com/nodepool/releases/download/v0.0.0-test.1/"
	if !bytes.Contains(manifest, []byte("uri: "+published)) {
		t.Fatalf("the krew manifest downloads from elsewhere than %s:\n%s", published, manifest)
	}
	manifest = bytes.ReplaceAll(manifest, []byte("uri: "+published), []byte("uri: "+srv.URL+"/"))
	work := t.TempDir()
	// The validator infers the plugin's name from the file's.
	local := filepath.Join(work, "nodepool.yaml")
	if err := os.WriteFile(local, manifest, 0o644); err != nil {
		t.Fatal(err)
	}

	// The validator runs `kubectl krew install`: kubectl finds krew as the
	// plugin kubectl-krew on PATH.
	bin := filepath.Join(work, "bin")
	goTool(t, work, []string{"GOBIN=" + bin}, "install", "sigs.k8s.io/krew/cmd/krew@"+krewVersion)
	if err := os.Rename(filepath.Join(bin, "krew"), filepath.Join(bin, "kubectl-krew")); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		// No kubectl here: one that runs plugins as kubectl does.
		shim := "#!/bin/sh\nplugin=\"kubectl-$1\"; shift; exec \"$plugin\" \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(shim), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Log("no kubectl on PATH: plugins run through a shell shim")
	}
	validate := goTool(t, work, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")},
		"run", "sigs.k8s.io/krew/cmd/validate-krew-manifest@"+krewVersion, "-manifest", local)
	for _, want := range []string{"structural validation OK", "all 1 spec.platforms installed fine"} {
		if !strings.Contains(validate, want) {
			t.Errorf("validate-krew-manifest said no %q:\n%s", want, validate)
		}
	}
}

// goTool runs the go command in dir with env added and returns its output;
// it fails the test if the command fails.
func goTool(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return string(b)
}

// licenseIn returns the LICENSE a plugin archive carries.
func licenseIn(t *testing.T, archive string) []byte {
	t.Helper()
	_, b := tarGzEntry(t, archive, "LICENSE")
	return b
}
