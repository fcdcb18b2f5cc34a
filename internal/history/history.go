// Package history is the record of a pool's rollouts: one ControllerRevision
// per rollout, owned by the pool, holding who started it, the hashes, the
// changed components, and the owner-facing spec with the digests of the
// ConfigMaps and Secrets it referenced (so an undo can restore it and tell
// whether their content changed since). The controller writes it; the CLI reads it.
package history

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Annotations on a revision; they change as the rollout progresses (the
// revision's data is immutable).
const (
	AnnotationOutcome   = "nodepool.dev/outcome"
	AnnotationCompleted = "nodepool.dev/completed"
)

// Completed is the value of AnnotationCompleted for a rollout that ended
// at t: as precise as the record's start (Entry.Started), so a rollout
// that ends within the second it started has a positive duration. Decode
// reads it, and the whole seconds of earlier records, with time.RFC3339.
func Completed(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Outcomes of a rollout.
const (
	OutcomeInProgress = "InProgress"
	OutcomeComplete   = "Complete"
	// OutcomeSuperseded: a newer rollout started before this one completed.
	OutcomeSuperseded = "Superseded"
	// OutcomeFailed: the health gate found the rollout's machines
	// unhealthy and rolled the pool back.
	OutcomeFailed = "Failed"
	// OutcomeReverted: a change nodepool did not make (initiator
	// external) that the controller undid when it found it. Such a record
	// is finished when it is written.
	OutcomeReverted = "Reverted"
	// OutcomeRecorded: a change nodepool did not make (initiator
	// external) that the controller could not undo (an edited old
	// MachineSet, whose values are kept nowhere); finished when written.
	OutcomeRecorded = "Recorded"
)

// IsExternalOutcome reports whether outcome is that of a change nodepool
// did not make: never a rollout of the controller's.
func IsExternalOutcome(outcome string) bool {
	return outcome == OutcomeReverted || outcome == OutcomeRecorded
}

// InitiatorExternal is the initiator of a record of a change nodepool did
// not make to the fields of a pool's MachineDeployment or MachineSet that
// roll, pause or hold its machines; Manager and Fields say who and what.
const InitiatorExternal = "external"

// Source is a ConfigMap or Secret the spec referenced, with the digest of
// its content at that revision.
type Source struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Entry is one rollout of a pool.
type Entry struct {
	Revision    int64     `json:"revision"`
	Initiator   string    `json:"initiator"`
	RolloutHash string    `json:"rolloutHash"`
	PayloadHash string    `json:"payloadHash"`
	Changed     []string  `json:"changedComponents,omitempty"`
	Started     time.Time `json:"started"`
	// ForcedAt is set for forced rollouts: machines created before it were replaced.
	ForcedAt *time.Time `json:"forcedAt,omitempty"`
	// Reason is why the rollout started when it needed one: the reason
	// given on the emergency path (outside maintenance windows), or the
	// drift deadline reached.
	Reason string `json:"reason,omitempty"`
	// RollbackOf is, for a rollback (initiator "rollback"), the revision
	// that failed its health check.
	RollbackOf int64 `json:"rollbackOf,omitempty"`
	// Machines is how many machines the rollout set out to replace (or
	// update in place), Rounds in how many rounds of at most
	// maxSurge+maxUnavailable, and Soak the soaks its health gate declared:
	// what its duration is scaled by to predict another rollout's
	// (durations.go). Records written before they were kept have none;
	// their spec stands in.
	Machines int32            `json:"machines,omitempty"`
	Rounds   int32            `json:"rounds,omitempty"`
	Soak     *metav1.Duration `json:"soak,omitempty"`
	// Manager and Fields are, for an external change (initiator
	// external), the field manager that wrote it and the fields it wrote,
	// as the object's managedFields tell them; Started is when.
	Manager string   `json:"manager,omitempty"`
	Fields  []string `json:"fields,omitempty"`
	// Spec is the owner-facing spec at this revision.
	Spec    nodepoolv1.NodePoolSpec `json:"spec"`
	Sources []Source                `json:"sources,omitempty"`

	// Outcome and Completed come from the revision's annotations.
	Outcome   string     `json:"outcome"`
	Completed *time.Time `json:"completed,omitempty"`
}

// Name of the revision of a pool.
func Name(pool string, revision int64) string { return fmt.Sprintf("%s-r%d", pool, revision) }

// New returns the ControllerRevision recording e (unowned: the caller sets
// the owner reference).
func New(namespace, pool string, e Entry) (*appsv1.ControllerRevision, error) {
	data := e
	data.Outcome, data.Completed = "", nil
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Name:        Name(pool, e.Revision),
			Labels:      map[string]string{nodepoolv1.LabelPool: pool},
			Annotations: map[string]string{AnnotationOutcome: OutcomeInProgress},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: e.Revision,
	}, nil
}

// Decode reads a revision back.
func Decode(cr *appsv1.ControllerRevision) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(cr.Data.Raw, &e); err != nil {
		return Entry{}, fmt.Errorf("ControllerRevision %s/%s is not a nodepool rollout record: %w", cr.Namespace, cr.Name, err)
	}
	e.Revision = cr.Revision
	e.Outcome = cr.Annotations[AnnotationOutcome]
	if v := cr.Annotations[AnnotationCompleted]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			e.Completed = &t
		}
	}
	return e, nil
}

// Sort orders revisions oldest first.
func Sort(crs []appsv1.ControllerRevision) {
	sort.Slice(crs, func(i, j int) bool { return crs[i].Revision < crs[j].Revision })
}
