package secrets_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/secrets"
)

func TestTheUpdateSecretIsNamedOnTheNodeAndReadBack(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers"}}
	s := secrets.NewUpdateSecret("nodepool-updates", pool, []byte("pointer"))
	ref := secrets.UpdateSecretRef("nodepool-updates", pool)
	key, err := secrets.ParseUpdateSecretRef(ref)
	if err != nil || key.Namespace != s.Namespace || key.Name != s.Name {
		t.Fatalf("the Node's reference %q reads as %v, %v; the Secret is %s/%s", ref, key, err, s.Namespace, s.Name)
	}
	if !secrets.HoldsPointer(s, []byte("pointer")) || secrets.HoldsPointer(s, []byte("other")) {
		t.Error("HoldsPointer does not compare the pointer config")
	}
	if _, err := secrets.DecodeUpdateSecret(ref, s); err == nil || !strings.Contains(err.Error(), ref) {
		t.Errorf("a pointer config that is not Ignition: %v", err)
	}
	for _, bad := range []string{"", "name-only", "/name", "ns/", "ns/a/b"} {
		if _, err := secrets.ParseUpdateSecretRef(bad); err == nil || !strings.Contains(err.Error(), nodepoolv1.AnnotationUpdateSecret) {
			t.Errorf("reference %q: %v", bad, err)
		}
	}
}
