package controller

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/history"
)

func fleetRecord(t *testing.T, pool *nodepoolv1.NodePool, rev int64, initiator string, forced *time.Time, outcome string) *appsv1.ControllerRevision {
	t.Helper()
	started := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if forced != nil {
		started = *forced
	}
	return fleetRecordStarted(t, pool, rev, initiator, forced, started, outcome)
}

func fleetRecordStarted(t *testing.T, pool *nodepoolv1.NodePool, rev int64, initiator string, forced *time.Time, started time.Time, outcome string) *appsv1.ControllerRevision {
	t.Helper()
	cr, err := history.New(pool.Namespace, pool.Name, history.Entry{Revision: rev, Initiator: initiator, ForcedAt: forced, Started: started})
	if err != nil {
		t.Fatal(err)
	}
	cr.OwnerReferences = []metav1.OwnerReference{{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: pool.Name, UID: pool.UID, Controller: ptr.To(true)}}
	cr.Annotations[history.AnnotationOutcome] = outcome
	return cr
}

// The fleet follows whichever rollout carries out its trigger: a drift
// deadline, a newer rolloutAfter or a hand apply-pending at or after the
// trigger, or an owner change started after it, replaces every machine
// older than it.
func TestAFleetPoolsRecordIsAnyForcedRolloutAtOrAfterItsTrigger(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers", UID: types.UID("u1")}}
	trigger := time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)
	older, newer := trigger.Add(-time.Hour), trigger.Add(3*time.Hour)
	initiator := nodepoolv1.FleetRolloutInitiator("proxy-fix")
	crs := []*appsv1.ControllerRevision{
		fleetRecord(t, pool, 3, "restart", &older, history.OutcomeComplete),
		fleetRecordStarted(t, pool, 4, "spec", nil, older, history.OutcomeComplete),
		fleetRecord(t, pool, 5, "deadline", &newer, history.OutcomeComplete),
	}
	got := record(pool, crs, trigger)
	if got == nil || got.Revision != 5 || got.Initiator != "deadline" || got.ForcedAt == nil || !got.ForcedAt.Equal(newer) || got.Outcome != history.OutcomeComplete {
		t.Fatalf("record %+v, want revision 5 (the deadline's, after the trigger)", got)
	}
	if got := record(pool, crs[:2], trigger); got != nil {
		t.Fatalf("record %+v: a forced rollout or an owner change before the trigger does not carry it out", got)
	}
	// An owner change started after the trigger replaces every machine on
	// the latest payload: it carries the trigger out; a rollback does not.
	owner := fleetRecordStarted(t, pool, 8, "spec", nil, newer, history.OutcomeComplete)
	if got := record(pool, []*appsv1.ControllerRevision{crs[0], owner}, trigger); got == nil || got.Revision != 8 || got.ForcedAt != nil {
		t.Fatalf("record %+v, want the owner rollout after the trigger, 8", got)
	}
	rollback := fleetRecordStarted(t, pool, 9, "rollback", nil, newer, history.OutcomeComplete)
	if got := record(pool, []*appsv1.ControllerRevision{rollback}, trigger); got != nil {
		t.Fatalf("record %+v: a rollback returns to an older payload and carries out nothing", got)
	}
	// Its own record, and a newer one that is in progress: the newest.
	own := fleetRecord(t, pool, 6, initiator, &trigger, history.OutcomeSuperseded)
	later := fleetRecord(t, pool, 7, "platform", &newer, history.OutcomeInProgress)
	if got := record(pool, []*appsv1.ControllerRevision{own, later}, trigger); got == nil || got.Revision != 7 {
		t.Fatalf("record %+v, want the newest, 7", got)
	}
}

// An emergency request's reason is read for the take-over message when it
// is for the pool's apply-pending time.
func TestAFleetPoolsOutsideWindowsReasonIsReadForItsRequest(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers", Annotations: map[string]string{
		"nodepool.dev/apply-pending-at":           "2026-12-01T10:10:01Z",
		nodepoolv1.AnnotationOutsideWindowsAt:     "2026-12-01T10:10:01Z",
		nodepoolv1.AnnotationOutsideWindowsReason: "CVE-2026-1234",
	}}}
	if got := fleet.Observe(pool, time.Now()).OutsideReason; got != "CVE-2026-1234" {
		t.Fatalf("reason %q", got)
	}
	pool.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] = "2026-11-01T00:00:00Z"
	if got := fleet.Observe(pool, time.Now()).OutsideReason; got != "" {
		t.Fatalf("reason %q of an older request", got)
	}
}
