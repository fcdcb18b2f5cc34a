package stack

import (
	"context"
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Machines is what a pool's machines and nodes are, as Cluster API and the
// workload cluster say: the UIDs of its Machines not being deleted, how
// many of them have a Node, and the Nodes by payload label.
type Machines struct {
	UIDs     sets.Set[string]
	Nodes    int
	Payloads map[string]int
}

// ReadMachines reads them for pool p.
func ReadMachines(ctx context.Context, c client.Reader, p *nodepoolv1.NodePool) (Machines, error) {
	out := Machines{UIDs: sets.New[string](), Payloads: map[string]int{}}
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		return out, fmt.Errorf("listing the machines of %s/%s: %w", p.Namespace, p.Name, err)
	}
	for _, m := range ms.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		out.UIDs.Insert(string(m.UID))
		if !m.Status.NodeRef.IsDefined() {
			continue
		}
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, n); err != nil {
			continue
		}
		out.Nodes++
		out.Payloads[n.Labels[nodepoolv1.LabelPayload]]++
	}
	return out, nil
}

// OnlyPayload is the payload label every node carries, "" when the nodes
// carry several or there are none.
func (m Machines) OnlyPayload() string {
	if len(m.Payloads) != 1 {
		return ""
	}
	for k := range m.Payloads {
		return k
	}
	return ""
}

// PayloadCounts lists the nodes by payload label, "<label>×<count>", sorted.
func (m Machines) PayloadCounts() []string {
	var p []string
	for k, v := range m.Payloads {
		p = append(p, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(p)
	return p
}

// PoolEvents are the messages of pool p's events of reason.
func PoolEvents(t testing.TB, c client.Reader, p *nodepoolv1.NodePool, reason string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(context.Background(), list, client.InNamespace(p.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == p.Name && e.Regarding.Kind == "NodePool" && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}
