package history

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Records returns the pool's rollout records among crs, oldest first: the
// ControllerRevisions status.revisions lists, by number and UID (the API
// server assigns UIDs, so a revision someone made with a copied owner
// reference is not among them). A pool whose status lists none (its
// records predate the list) trusts every revision it controls.
func Records(pool *nodepoolv1.NodePool, crs []appsv1.ControllerRevision) []appsv1.ControllerRevision {
	var out []appsv1.ControllerRevision
	for _, cr := range crs {
		if IsRecord(pool, &cr) {
			out = append(out, cr)
		}
	}
	Sort(out)
	return out
}

// IsRecord reports whether cr is one of the pool's records (see Records).
func IsRecord(pool *nodepoolv1.NodePool, cr *appsv1.ControllerRevision) bool {
	if !metav1.IsControlledBy(cr, pool) {
		return false
	}
	if len(pool.Status.Revisions) == 0 {
		return true
	}
	for _, r := range pool.Status.Revisions {
		if r.Revision == cr.Revision && r.UID == cr.UID {
			return true
		}
	}
	return false
}

// Unlisted returns the revisions the pool controls that status.revisions
// does not list, oldest first: a record whose listing a crash interrupted,
// or someone else's.
func Unlisted(pool *nodepoolv1.NodePool, crs []appsv1.ControllerRevision) []appsv1.ControllerRevision {
	if len(pool.Status.Revisions) == 0 {
		return nil
	}
	trusted := map[nodepoolv1.RevisionReference]bool{}
	for _, r := range References(Records(pool, crs)) {
		trusted[r] = true
	}
	var out []appsv1.ControllerRevision
	for _, cr := range crs {
		if metav1.IsControlledBy(&cr, pool) && !trusted[nodepoolv1.RevisionReference{Revision: cr.Revision, UID: cr.UID}] {
			out = append(out, cr)
		}
	}
	Sort(out)
	return out
}

// Newest is the highest revision of refs (0 when there is none): the
// pool's current rollout.
func Newest(refs []nodepoolv1.RevisionReference) int64 {
	var n int64
	for _, r := range refs {
		n = max(n, r.Revision)
	}
	return n
}

// References lists crs as status.revisions.
func References(crs []appsv1.ControllerRevision) []nodepoolv1.RevisionReference {
	out := make([]nodepoolv1.RevisionReference, 0, len(crs))
	for _, cr := range crs {
		out = append(out, nodepoolv1.RevisionReference{Revision: cr.Revision, UID: cr.UID})
	}
	return out
}

// Current is the pool's current rollout among its records (sorted oldest
// first): the newest that records a rollout of the controller's, not an
// external change (finished when written); nil when there is none. The
// engine keeps what it knows about that rollout on its annotations.
func Current(records []appsv1.ControllerRevision) *appsv1.ControllerRevision {
	for i := len(records) - 1; i >= 0; i-- {
		if !IsExternalOutcome(records[i].Annotations[AnnotationOutcome]) {
			return &records[i]
		}
	}
	return nil
}
