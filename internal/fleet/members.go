package fleet

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Store asks the controller to write a member's kept state on its pool:
// the annotation FleetRolloutPoolAnnotation(name) set to Value.
type Store struct {
	Ref
	Value string
}

// kept is what a member's annotation holds: what cannot be observed again
// later (its wave, its trigger time, its revision, an end and why). What
// is observed each time (waiting and why, failed, held) is not kept, so a
// pool's annotation changes a few times in a rollout, not at every look.
type kept struct {
	Wave        int32                     `json:"wave"`
	State       nodepoolv1.FleetPoolState `json:"state"`
	TriggeredAt string                    `json:"triggeredAt,omitempty"`
	Revision    int64                     `json:"revision,omitempty"`
	Message     string                    `json:"message,omitempty"`
}

// Encode is the annotation value a member keeps on its pool.
func Encode(p nodepoolv1.FleetRolloutPool) string { return keptOf(p).encode() }

// keptOf is what a member keeps on its pool. Two members keep the same
// annotation exactly when their kept values are equal (==): a decision
// compares them, and encodes only the members whose value changed.
func keptOf(p nodepoolv1.FleetRolloutPool) kept {
	k := kept{Wave: p.Wave, State: p.State, Revision: p.Revision}
	switch p.State {
	case nodepoolv1.FleetPoolWaiting:
		k.State = nodepoolv1.FleetPoolPending // a started wave's pools wait
	case nodepoolv1.FleetPoolFailed:
		k.State = nodepoolv1.FleetPoolRolling // observed again each time
	case nodepoolv1.FleetPoolDone, nodepoolv1.FleetPoolSkipped, nodepoolv1.FleetPoolTakenOver:
		k.Message = p.Message
	}
	if p.TriggeredAt != nil {
		k.TriggeredAt = p.TriggeredAt.UTC().Format(time.RFC3339)
	}
	return k
}

func (k kept) encode() string {
	raw, _ := json.Marshal(k)
	return string(raw)
}

// Decode reads a member's kept state from its pool's annotation.
func Decode(namespace, name, value string) (nodepoolv1.FleetRolloutPool, error) {
	var k kept
	if err := json.Unmarshal([]byte(value), &k); err != nil {
		return nodepoolv1.FleetRolloutPool{}, fmt.Errorf("pool %s/%s: fleet rollout state %q: %w", namespace, name, value, err)
	}
	p := nodepoolv1.FleetRolloutPool{Namespace: namespace, Name: name, Wave: k.Wave, State: k.State, Revision: k.Revision, Message: k.Message}
	if k.Wave < 1 {
		return p, fmt.Errorf("pool %s/%s: fleet rollout state %q: wave must be 1 or more", namespace, name, value)
	}
	switch k.State {
	case nodepoolv1.FleetPoolPending, nodepoolv1.FleetPoolRolling, nodepoolv1.FleetPoolDone, nodepoolv1.FleetPoolSkipped, nodepoolv1.FleetPoolTakenOver:
	default:
		return p, fmt.Errorf("pool %s/%s: fleet rollout state %q: state must be Pending, Rolling, Done, Skipped or TakenOver", namespace, name, value)
	}
	if k.TriggeredAt != "" {
		at, err := parseTime(k.TriggeredAt)
		if err != nil {
			return p, fmt.Errorf("pool %s/%s: fleet rollout state %q: triggeredAt: %w", namespace, name, value, err)
		}
		p.TriggeredAt = &at
	}
	if (k.State == nodepoolv1.FleetPoolRolling || k.State == nodepoolv1.FleetPoolTakenOver) && p.TriggeredAt == nil {
		return p, fmt.Errorf("pool %s/%s: fleet rollout state %q: a %s pool needs triggeredAt", namespace, name, value, k.State)
	}
	return p, nil
}

// members is a sorted copy of the members (sorted already, as the
// controller hands them, it is only checked).
func members(in []nodepoolv1.FleetRolloutPool) []nodepoolv1.FleetRolloutPool {
	out := make([]nodepoolv1.FleetRolloutPool, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	if !slices.IsSortedFunc(out, compareMembers) {
		slices.SortFunc(out, compareMembers)
	}
	return out
}

// compareMembers orders members by namespace, then name.
func compareMembers(a, b nodepoolv1.FleetRolloutPool) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// SortMembers sorts members by namespace, then name: the order Decide
// works in, which it then need not sort again.
func SortMembers(members []nodepoolv1.FleetRolloutPool) { slices.SortFunc(members, compareMembers) }

// maxAttentionMessage bounds a message status.attention quotes.
const maxAttentionMessage = 512

// attention lists the pools that need a person, failed first, then taken
// over, then held, at most FleetAttentionMax, with a count of the rest.
func attention(pools []nodepoolv1.FleetRolloutPool, held map[Ref]bool) ([]nodepoolv1.FleetRolloutPool, int32) {
	var failed, taken, waiting []nodepoolv1.FleetRolloutPool
	for _, p := range pools {
		switch {
		case p.State == nodepoolv1.FleetPoolFailed:
			failed = append(failed, p)
		case p.State == nodepoolv1.FleetPoolTakenOver:
			taken = append(taken, p)
		case held[RefOf(p)] && (p.State == nodepoolv1.FleetPoolWaiting || p.State == nodepoolv1.FleetPoolRolling):
			waiting = append(waiting, p)
		}
	}
	all := append(append(failed, taken...), waiting...)
	n := min(len(all), nodepoolv1.FleetAttentionMax)
	var out []nodepoolv1.FleetRolloutPool
	for _, p := range all[:n] {
		if len(p.Message) > maxAttentionMessage {
			p.Message = p.Message[:maxAttentionMessage] + "…"
		}
		out = append(out, p)
	}
	return out, int32(len(all) - n)
}

func parseTime(s string) (metav1.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	return metav1.NewTime(t.UTC()), err
}
