package devenv

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// machine is one Machine of a pool and the Node it got.
type machine struct {
	uid     types.UID
	name    string
	node    string
	ready   bool
	payload string // the Node's nodepool.dev/payload label
	// cordoned and phase: the Node's spec.unschedulable and in-place
	// update phase (InPlace pools).
	cordoned bool
	phase    string
}

// poolState is what a pool's machines and nodes are, as Cluster API and
// the workload cluster (the same API server here) say.
type poolState struct {
	pool     *nodepoolv1.NodePool
	machines []machine // by name
}

// observePool reads the pool, its Machines (not being deleted) and their Nodes.
func observePool(ctx context.Context, c client.Client, key client.ObjectKey) (poolState, error) {
	s := poolState{pool: &nodepoolv1.NodePool{}}
	if err := c.Get(ctx, key, s.pool); err != nil {
		return s, err
	}
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(key.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: key.Name}); err != nil {
		return s, err
	}
	for _, m := range ms.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		mm := machine{uid: m.UID, name: m.Name}
		if m.Status.NodeRef.IsDefined() {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, n); err == nil {
				mm.node = n.Name
				mm.payload = n.Labels[nodepoolv1.LabelPayload]
				mm.cordoned, mm.phase = n.Spec.Unschedulable, n.Annotations[nodepoolv1.AnnotationUpdatePhase]
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady {
						mm.ready = cond.Status == corev1.ConditionTrue
					}
				}
			}
		}
		s.machines = append(s.machines, mm)
	}
	sort.Slice(s.machines, func(i, j int) bool { return s.machines[i].name < s.machines[j].name })
	return s, nil
}

// uids are the pool's machines.
func (s poolState) uids() map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, m := range s.machines {
		out[m.uid] = true
	}
	return out
}

// readyNodes counts machines whose Node is ready.
func (s poolState) readyNodes() int {
	n := 0
	for _, m := range s.machines {
		if m.ready {
			n++
		}
	}
	return n
}

// payloads counts ready nodes by payload label.
func (s poolState) payloads() map[string]int {
	out := map[string]int{}
	for _, m := range s.machines {
		if m.ready {
			out[m.payload]++
		}
	}
	return out
}

// onlyPayload is the payload every machine's ready Node booted, or "".
func (s poolState) onlyPayload() string {
	p := s.payloads()
	if len(p) != 1 || s.readyNodes() != len(s.machines) {
		return ""
	}
	for k := range p {
		return k
	}
	return ""
}

// settled: n machines, each with a ready Node, all on one payload, the pool
// Ready and not updating.
func (s poolState) settled(n int) bool {
	return len(s.machines) == n && s.onlyPayload() != "" && s.pool.Status.Updating == "" &&
		meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionReady)
}

// countIn counts the pool's machines among uids.
func (s poolState) countIn(uids map[types.UID]bool) int {
	n := 0
	for _, m := range s.machines {
		if uids[m.uid] {
			n++
		}
	}
	return n
}

// payloadList renders payload counts as "a×3 b×1".
func payloadList(p map[string]int) string {
	if len(p) == 0 {
		return "none"
	}
	var out []string
	for k, v := range p {
		out = append(out, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// condition returns a pool condition; a missing one is Unknown.
func condition(p *nodepoolv1.NodePool, t string) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{Type: t, Status: metav1.ConditionUnknown}
}

// conditionLine renders a condition as Type=Status (Reason): message.
func conditionLine(c metav1.Condition) string {
	s := fmt.Sprintf("%s=%s", c.Type, c.Status)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
