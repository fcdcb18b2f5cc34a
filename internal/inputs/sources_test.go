package inputs_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

func TestSourceDigestIsWhatGatherRecords(t *testing.T) {
	w := inputstest.New()
	in := w.MustGather(t)
	recorded := map[string]string{}
	for _, s := range in.Sources {
		recorded[s.Kind+"/"+s.Name] = s.Digest
	}
	for name, obj := range map[string]client.Object{
		"ConfigMap/chrony":   w.UserConfigs[0],
		"ConfigMap/corp-ca":  w.TrustBundle,
		"Secret/pull-secret": w.PullSecret,
	} {
		if got, err := inputs.SourceDigest(obj); err != nil || got != recorded[name] {
			t.Errorf("SourceDigest(%s) = %q, %v; Gather recorded %q", name, got, err, recorded[name])
		}
	}
	if _, err := inputs.SourceDigest(w.Pool); err == nil {
		t.Error("SourceDigest of a NodePool must fail")
	}
}

func TestReferences(t *testing.T) {
	w := inputstest.New()
	other := inputstest.ConfigMap("unrelated", "")
	elsewhere := inputstest.ConfigMap("chrony", "")
	elsewhere.Namespace = "team-b"
	for _, c := range []struct {
		obj  client.Object
		want bool
	}{
		{w.UserConfigs[0], true}, {w.UserConfigs[1], true}, {w.TrustBundle, true}, {w.PullSecret, true},
		{w.Cluster, true}, {w.Template, true},
		{other, false}, {elsewhere, false}, {w.Management, false},
	} {
		if got := inputs.References(w.Pool, c.obj); got != c.want {
			t.Errorf("References(%s %s/%s) = %v, want %v", c.obj.GetObjectKind().GroupVersionKind().Kind, c.obj.GetNamespace(), c.obj.GetName(), got, c.want)
		}
	}
}
