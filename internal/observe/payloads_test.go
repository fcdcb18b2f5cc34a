package observe_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// evil is the fragment a forger adds.
var evil = []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/evil","contents":{"source":"data:,x"}}]}}`)

// forgedCopy is the pool's payload Secret genuine copied under name, its
// labels, annotations and controller reference kept, with fragments that
// add /etc/evil and a manifest that matches them.
func forgedCopy(t *testing.T, genuine *corev1.Secret, name string) *corev1.Secret {
	t.Helper()
	s := genuine.DeepCopy()
	s.Name, s.ResourceVersion, s.UID = name, "", ""
	raw, err := secrets.Gunzip(s.Data[secrets.KeyFragments])
	if err != nil {
		t.Fatal(err)
	}
	var frags map[string]json.RawMessage
	if err := json.Unmarshal(raw, &frags); err != nil {
		t.Fatal(err)
	}
	manifest := map[string]string{}
	frags[inputs.Release.Name()] = evil
	for c, f := range frags {
		manifest[c] = payload.Digest(f)
	}
	rawFrags, _ := json.Marshal(frags)
	rawManifest, _ := json.Marshal(manifest)
	s.Data[secrets.KeyFragments], s.Data[secrets.KeyManifest] = secrets.Gzip(rawFrags), rawManifest
	return s
}

// poolWithPayload is a world whose pool owns its latest payload's Secret.
func poolWithPayload(t *testing.T) (*inputstest.World, *payload.Payload, *corev1.Secret) {
	t.Helper()
	w := inputstest.New()
	w.Pool.UID = "pool-uid"
	p, _, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := secrets.NewPayloadSecret(w.Pool.Namespace, secrets.PayloadSecretName(w.Pool.Name, p.Hash), secrets.FromPayload(p))
	if err != nil {
		t.Fatal(err)
	}
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: w.Pool.Name, UID: w.Pool.UID, Controller: ptr.To(true)}}
	return w, p, s
}

func readPool(t *testing.T, c client.Reader, w *inputstest.World) (*observe.Objects, rollout.Input) {
	t.Helper()
	var in rollout.Input
	o, err := observe.Read(context.Background(), c, w.Pool, &in, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return o, in
}

func hasEvil(p *payload.Payload) bool {
	for _, f := range p.Fragments {
		if strings.Contains(string(f), "/etc/evil") {
			return true
		}
	}
	return false
}

func TestAForgedPayloadSecretOfAnotherNameIsNeverRead(t *testing.T) {
	w, p, genuine := poolWithPayload(t)
	// One sorted before the genuine Secret, one after: whatever the order
	// of the list, neither is read as the pool's payload.
	w.Extra = []client.Object{genuine, forgedCopy(t, genuine, "aaaa-payload"), forgedCopy(t, genuine, "zzzz-payload")}
	o, in := readPool(t, w.Client(), w)
	got, ok := in.Payloads[p.Hash]
	if !ok || len(in.Payloads) != 1 || hasEvil(got) || o.Payloads[p.Hash].Name != genuine.Name {
		t.Fatalf("read %d payloads (the running one from Secret %s, forged fragments: %v), want the genuine Secret's only", len(in.Payloads), o.Payloads[p.Hash].GetName(), ok && hasEvil(got))
	}
	if len(o.Refused) != 2 {
		t.Fatalf("refused %v, want both forged Secrets", o.Refused)
	}
	for _, r := range o.Refused {
		if r.Reason != secrets.RefusedNameMismatch || !strings.HasSuffix(r.Secret.Name, "-payload") || strings.Contains(r.Err.Error(), "/etc/evil") {
			t.Errorf("refusal %s: %s %v", r.Secret.Name, r.Reason, r.Err)
		}
	}

	// Without the genuine Secret, the pool has no payload stored.
	w.Extra = w.Extra[1:]
	if o, in := readPool(t, w.Client(), w); len(in.Payloads) != 0 || len(o.Refused) != 2 {
		t.Fatalf("with forged Secrets only: read %d payloads, refused %d", len(in.Payloads), len(o.Refused))
	}
}

func TestAPayloadSecretOfThePoolsNameIsUsedOnlyIfItHashesToItsClaimAndThePoolControlsIt(t *testing.T) {
	w, p, genuine := poolWithPayload(t)
	// The right name, the pool's controller reference, content of
	// another hash: refused (a forger who got there first).
	w.Extra = []client.Object{forgedCopy(t, genuine, genuine.Name)}
	o, in := readPool(t, w.Client(), w)
	if len(in.Payloads) != 0 || len(o.Refused) != 1 || o.Refused[0].Reason != secrets.RefusedHashMismatch {
		t.Fatalf("forged content under the right name: read %d payloads, refused %+v", len(in.Payloads), o.Refused)
	}
	// The right name and genuine content, no controller reference: not
	// the pool's, refused and reported.
	orphan := genuine.DeepCopy()
	orphan.OwnerReferences = nil
	w.Extra = []client.Object{orphan}
	o, in = readPool(t, w.Client(), w)
	if len(in.Payloads) != 0 || len(o.Refused) != 1 || o.Refused[0].Reason != secrets.RefusedNotOwned {
		t.Fatalf("the genuine content without the pool's controller reference: read %d payloads, refused %+v", len(in.Payloads), o.Refused)
	}
	// A Secret of the pool's label that is not the pool's and not of a
	// payload name of the pool's is someone else's: not reported.
	other := orphan.DeepCopy()
	other.Name = "unrelated"
	w.Extra = []client.Object{genuine, other}
	if o, in := readPool(t, w.Client(), w); len(in.Payloads) != 1 || len(o.Refused) != 0 || hasEvil(in.Payloads[p.Hash]) {
		t.Fatalf("the genuine Secret and an unrelated one: read %d payloads, refused %+v", len(in.Payloads), o.Refused)
	}
}
