package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

func TestAnAnnouncementIsEmittedOncePerVersionOfThePoolAndAWarningEveryTime(t *testing.T) {
	r := &Reconciler{announcements: newLRU[string, bool](16)}
	pool := func(rv string) *nodepoolv1.NodePool {
		return &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: rv}}
	}
	complete := rollout.Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutComplete, Message: "every machine runs p-userdata-1"}
	blocked := rollout.Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventDrainBlocked, Message: "a PodDisruptionBudget blocks the drain"}
	for _, step := range []struct {
		name    string
		pool    *nodepoolv1.NodePool
		event   rollout.Event
		emitted bool
	}{
		{"first reconcile of version 10", pool("10"), complete, true},
		{"a second reconcile of version 10 decides the same", pool("10"), complete, false},
		{"another announcement of version 10", pool("10"), rollout.Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutStarted, Message: "rolling out"}, true},
		{"version 11", pool("11"), complete, true},
		{"a warning", pool("11"), blocked, true},
		{"the same warning again: it still holds", pool("11"), blocked, true},
	} {
		if got := !r.announced(step.pool, step.event); got != step.emitted {
			t.Errorf("%s: emitted %v, want %v", step.name, got, step.emitted)
		}
	}
}
