package sim

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestKubeconfigForInlinesFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name  string
		cfg   *rest.Config
		check func(*rest.Config) bool
	}{
		{name: "client certificate data (envtest)",
			cfg: &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}},
			check: func(c *rest.Config) bool {
				return string(c.CAData) == "ca" && string(c.CertData) == "cert" && string(c.KeyData) == "key"
			}},
		{name: "files (in-cluster service account)",
			cfg:   &rest.Config{Host: "https://10.0.0.1:443", BearerTokenFile: write("token", "sa-token"), TLSClientConfig: rest.TLSClientConfig{CAFile: write("ca.crt", "ca-from-file")}},
			check: func(c *rest.Config) bool { return c.BearerToken == "sa-token" && string(c.CAData) == "ca-from-file" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := kubeconfigFor(tt.cfg, "c1")
			if err != nil {
				t.Fatal(err)
			}
			got, err := clientcmd.RESTConfigFromKubeConfig(b)
			if err != nil {
				t.Fatalf("the kubeconfig does not load: %v\n%s", err, b)
			}
			if got.Host != tt.cfg.Host || !tt.check(got) {
				t.Fatalf("kubeconfig lost something:\n%s", b)
			}
		})
	}
	if _, err := kubeconfigFor(&rest.Config{Host: "https://x", BearerTokenFile: filepath.Join(dir, "missing")}, "c1"); err == nil {
		t.Fatal("a missing token file must fail")
	}
}
