package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"nodepool.dev/nodepool/internal/inputs"
)

func TestEveryCommandExplainsItselfWithAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%q lacks a short text, a long text or an example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := NewCommand(genericiooptions.NewTestIOStreamsDiscard())
	walk(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"rollout", "undo", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kubectl nodepool rollout undo workers --to-revision 2 --force") || !strings.Contains(out.String(), "Usage:\n  kubectl nodepool rollout undo POOL") {
		t.Errorf("rollout undo --help:\n%s", out.String())
	}
}

func TestFragmentLinesRedactSecrets(t *testing.T) {
	frag := []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[` +
		`{"path":"/etc/app.conf","mode":420,"contents":{"source":"data:,hello%0Aworld%0A"}},` +
		`{"path":"/etc/app.key","mode":384,"contents":{"source":"data:;base64,c2VjcmV0"}}]}}`)
	got := strings.Join(fragmentLines(inputs.UserConfigs, frag), "\n")
	want := "file /etc/app.conf (mode 0644)\n  | hello\n  | world\nfile /etc/app.key (mode 0600)\n  [redacted: 6 bytes, sha256:2bb80d537b1da3e3]"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	pull := []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/var/lib/kubelet/config.json","mode":420,"contents":{"source":"data:,secret"}}]}}`)
	if got := strings.Join(fragmentLines(inputs.PullSecret, pull), "\n"); strings.Contains(got, "secret") && !strings.Contains(got, "redacted") {
		t.Errorf("the pull secret is shown: %s", got)
	}
}

func TestManifestsRefuseOtherKinds(t *testing.T) {
	_, err := readManifests([]string{"-"}, strings.NewReader("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"), "ns")
	if err == nil || !strings.Contains(err.Error(), "-f -, document 1 is a Deployment (apps/v1): plan takes NodePools (nodepool.dev/v1alpha1), ConfigMaps, Secrets, Clusters (cluster.x-k8s.io/v1beta2) and infrastructure machine templates") {
		t.Errorf("err = %v", err)
	}
	m, err := readManifests([]string{"-"}, strings.NewReader("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n  data: {k: c2VjcmV0}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\n"), "ns")
	if err != nil || len(m.objects) != 2 || m.objects[0].GetNamespace() != "ns" || m.objects[1].GetNamespace() != "other" {
		t.Fatalf("manifests = %+v, %v", m, err)
	}
}
