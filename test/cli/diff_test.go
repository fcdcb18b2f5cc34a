package cli_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/test/stack"
)

func TestDiffShowsWhatANewNodeWouldBootAndRedactsSecrets(t *testing.T) {
	ns := newNamespace(t)
	mustCreate(t, stack.PullSecret(ns, "pull", "robot:first-password"))
	p := newPool(t, ns, "workers", 1, func(p *nodepoolv1.NodePool) {
		p.Spec.PullSecretRef = &nodepoolv1.LocalObjectReference{Name: "pull"}
	})
	waitFor(t, p, rolloutTimeout, "1 ready machine", settled(1))
	golden(t, "diff-none", ok(t, ns, "diff", "workers"), ns)

	// The platform bumps the API-server proxy (pinned: new nodes keep the
	// running one) and the pull secret rotates (fresh: new nodes get it).
	setProxyImage(t, "d")
	update(t, stack.PullSecret(ns, "pull", ""), func(s *corev1.Secret) {
		s.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"registry.example":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("robot:second-password")) + `"}}}`)
	})
	waitFor(t, p, 30*time.Second, "drift of both reported", func(s state) bool {
		return hasDrift("apiserver-proxy")(s) && hasDrift("pull-secret")(s)
	})
	// The token moves to a payload with the new pull secret.
	var d cli.PayloadDiff
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		d = decodeJSON[cli.PayloadDiff](t, ok(t, ns, "diff", "workers", "-o", "json"))
		if d.NewNode != d.Running {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, c := range d.Components {
		switch c.Component {
		case "apiserver-proxy":
			if c.NewNode != c.Running || c.Latest == c.Running {
				t.Errorf("apiserver-proxy is pinned: new nodes keep it, the latest payload changes it: %+v", c)
			}
		case "pull-secret":
			if c.NewNode == c.Running || c.Latest != c.NewNode || c.Diff == "" {
				t.Errorf("pull-secret is fresh: new nodes get the latest: %+v", c)
			}
		default:
			if c.NewNode != c.Running || c.Latest != c.Running {
				t.Errorf("component %s changed: %+v", c.Component, c)
			}
		}
	}
	out := ok(t, ns, "diff", "workers")
	latest := ok(t, ns, "diff", "workers", "--against", "latest")
	for _, o := range []string{out, latest, ok(t, ns, "diff", "workers", "-o", "yaml")} {
		if strings.Contains(o, "password") || strings.Contains(o, base64.StdEncoding.EncodeToString([]byte("robot:second-password"))) {
			t.Fatalf("diff shows secret content:\n%s", o)
		}
	}
	if !strings.Contains(out, "[redacted: ") {
		t.Errorf("no redacted content in:\n%s", out)
	}
	golden(t, "diff-new-node", out, ns)
	golden(t, "diff-latest", latest, ns)
}
