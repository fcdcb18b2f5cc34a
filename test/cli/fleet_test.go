package cli_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/test/stack"
)

func TestFleetListsPendingDriftByComponentWithItsAge(t *testing.T) {
	ns := newNamespace(t)
	mustCreate(t, stack.PullSecret(ns, "pull", "robot:one"))
	beta := newPool(t, ns, "beta", 1, func(p *nodepoolv1.NodePool) {
		p.Spec.PullSecretRef = &nodepoolv1.LocalObjectReference{Name: "pull"}
	})
	waitFor(t, beta, rolloutTimeout, "beta ready", settled(1))
	setProxyImage(t, "f")
	waitFor(t, beta, 30*time.Second, "beta's drift", hasDrift("apiserver-proxy"))
	time.Sleep(1100 * time.Millisecond) // the two drifts have different ages
	update(t, stack.PullSecret(ns, "pull", ""), func(s *corev1.Secret) { s.Data = stack.PullSecret(ns, "pull", "robot:two").Data })
	waitFor(t, beta, 30*time.Second, "beta's second drift", hasDrift("pull-secret"))
	alpha := newPool(t, ns, "alpha", 1, nil)
	waitFor(t, alpha, rolloutTimeout, "alpha ready", settled(1))

	golden(t, "fleet", ok(t, ns, "fleet"), ns)
	golden(t, "fleet-pending", ok(t, ns, "fleet", "--pending", "--sort-by", "drift-age"), ns)

	rows := decodeJSON[[]cli.FleetRow](t, ok(t, ns, "fleet", "--sort-by", "drift-age", "-o", "json"))
	if len(rows) != 2 || rows[0].Pool != "beta" || rows[1].Pool != "alpha" {
		t.Fatalf("rows by drift age: %+v", rows)
	}
	b := rows[0]
	if len(b.Drift) != 2 || b.Drift[0].Component != "pull-secret" && b.Drift[1].Component != "pull-secret" || b.OldestDriftSeconds < 1 || len(rows[1].Drift) != 0 {
		t.Errorf("beta's drift: %+v; alpha's: %+v", b, rows[1])
	}
	for _, d := range b.Drift {
		if d.Current == "" || d.Desired == "" || d.Current == d.Desired || d.Since.IsZero() {
			t.Errorf("drift row %+v", d)
		}
	}

	// -A lists this namespace's pools among the others, without -n.
	all := ok(t, "", "fleet", "-A")
	if !regexp.MustCompile(ns+`\s+alpha\s`).MatchString(all) || !regexp.MustCompile(ns+`\s+beta\s`).MatchString(all) {
		t.Errorf("fleet -A does not list %s:\n%s", ns, all)
	}
	// Without -n, the kubeconfig context's namespace.
	kc, err := st.WriteKubeconfig("kubeconfig-"+ns, ns)
	if err != nil {
		t.Fatal(err)
	}
	if out := ok(t, "", "--kubeconfig", kc, "fleet"); normalise(out, ns) != normalise(ok(t, ns, "fleet"), ns) {
		t.Errorf("fleet in the context's namespace:\n%s", out)
	}
	if r := fails(t, ns, cli.ExitFailure, "fleet", "--sort-by", "size"); !strings.Contains(r.err, "use one of cluster, drift, drift-age, name, version") {
		t.Errorf("bad --sort-by: %s", r.err)
	}
	if r := fails(t, ns, cli.ExitFailure, "fleet", "-o", "xml"); !strings.Contains(r.err, `--output "xml" is not supported: use table, wide, json, yaml`) {
		t.Errorf("bad -o: %s", r.err)
	}
}
