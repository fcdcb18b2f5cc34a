package move

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/internal/userdata"
	"nodepool.dev/nodepool/test/stack"
)

// fleet is what a pool's machines are, by the names a move keeps (the
// UIDs of the moved objects change): Machine name → its Node's name and
// UID in the workload cluster (which does not move), "" while the
// Machine has no Node on record.
type fleet map[string]string

func (f fleet) String() string {
	var out []string
	for m, n := range f {
		out = append(out, m+"→"+n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// withNodes counts the machines whose Node is on record.
func (f fleet) withNodes() int {
	n := 0
	for _, v := range f {
		if v != "" {
			n++
		}
	}
	return n
}

// machinesOf reads pool p's machines in management cluster st, and their
// Nodes in the workload cluster (the source's API server).
func machinesOf(t *testing.T, st *stack.Stack, p *nodepoolv1.NodePool) fleet {
	t.Helper()
	ctx := context.Background()
	ms := &clusterv1.MachineList{}
	if err := st.Env.Client.List(ctx, ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	out := fleet{}
	for _, m := range ms.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		out[m.Name] = ""
		if !m.Status.NodeRef.IsDefined() {
			continue
		}
		n := &corev1.Node{}
		if err := src.Env.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, n); err == nil {
			out[m.Name] = fmt.Sprintf("%s/%s", n.Name, n.UID)
		}
	}
	return out
}

// kubectlNodepool runs `kubectl nodepool args...` in-process against the
// management cluster kubeconfig reaches, in namespace ns.
func kubectlNodepool(kubeconfig, ns string, args ...string) (string, int) {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := cli.Run(context.Background(), streams, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...))
	return out.String() + errOut.String(), code
}

// tokensOf reads the current token of each of pool p's token Secrets in
// st, by Secret name.
func tokensOf(t *testing.T, st *stack.Stack, p *nodepoolv1.NodePool) map[string]string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := st.Env.Client.List(context.Background(), list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name, "nodepool.dev/secret-kind": "token"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Name] = string(s.Data["token"])
	}
	return out
}

// tlsConfig trusts what a machine's user-data says to trust.
func tlsConfig(p *userdata.Pointer) *tls.Config {
	return &tls.Config{RootCAs: p.CertPool(), MinVersion: tls.VersionTLS12}
}

// machineConditions describes the pool's Machines in st by their
// conditions that are not True, for a failure message.
func machineConditions(t *testing.T, st *stack.Stack, p *nodepoolv1.NodePool) string {
	t.Helper()
	ms := &clusterv1.MachineList{}
	if err := st.Env.Client.List(context.Background(), ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		return err.Error()
	}
	var out []string
	for _, m := range ms.Items {
		var cs []string
		for _, c := range m.Status.Conditions {
			if c.Status != "True" {
				cs = append(cs, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
			}
		}
		out = append(out, fmt.Sprintf("%s [phase %s, nodeRef %v]: %s", m.Name, m.Status.Phase, m.Status.NodeRef.IsDefined(), strings.Join(cs, "; ")))
	}
	return strings.Join(out, "\n")
}

// copyTokenKey copies the controller's token binding key from src to dst,
// as an operator does before a move (kubectl get -o yaml | kubectl apply).
func copyTokenKey(t *testing.T, src, dst *stack.Stack) {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: stack.ManagementNamespace, Name: secrets.TokenKeyName}
	from := &corev1.Secret{}
	if err := src.Env.Client.Get(ctx, key, from); err != nil {
		t.Fatalf("the source's token binding key: %v", err)
	}
	to := &corev1.Secret{}
	switch err := dst.Env.Client.Get(ctx, key, to); {
	case apierrors.IsNotFound(err):
		to = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: from.Type, Data: from.Data}
		if err := dst.Env.Client.Create(ctx, to); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatal(err)
	default:
		to.Data = from.Data
		if err := dst.Env.Client.Update(ctx, to); err != nil {
			t.Fatal(err)
		}
	}
}
