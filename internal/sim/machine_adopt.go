package sim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// payloadLabelDomain is the domain of the labels a payload's kubelet sets
// (payload.NodeLabels).
const payloadLabelDomain = "nodepool.dev/"

// adopt takes over a machine that is running already: a SimMachine with a
// providerID (set when its Node registered) but no status, as clusterctl
// move leaves it in the target management cluster (a move creates the
// object anew, without its status). Like a real provider that finds its
// instance by ID, the sim finds the machine's Node in the workload cluster
// by name and providerID and takes what it booted from it: the machine
// never boots twice. No such Node: the machine boots as a new one.
//
// The SimMachine read from the cache may be one the sim wrote itself a
// moment ago: its spec (the providerID) and status are written in two
// requests, so the cache can hold the first without the second. The API
// server is asked first; a status it has is taken as it is, and only a
// SimMachine that really lacks it is adopted.
//
// Only the payload's labels are taken from the Node (nodepool's own
// domain, as payload.NodeLabels sets them): the kubelet's and anyone
// else's are not the payload's, and an in-place update must never remove
// them.
//
// An error says the Node could not be looked for yet: the machine must
// not boot before it is.
func (r *machineReconciler) adopt(ctx context.Context, sm *simv1.SimMachine, machine *clusterv1.Machine) error {
	log := ctrl.FromContext(ctx)
	live := &simv1.SimMachine{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(sm), live); err != nil {
		return fmt.Errorf("reading SimMachine %s/%s from the API server: %w", sm.Namespace, sm.Name, err)
	}
	if live.Status.BootedPayload != "" {
		sm.Status.BootedPayload, sm.Status.NodeLabels, sm.Status.FailAt = live.Status.BootedPayload, live.Status.NodeLabels, live.Status.FailAt
		return nil
	}
	wc, err := r.workload.GetClient(ctx, clusterOf(sm, machine))
	if err != nil {
		return fmt.Errorf("cannot reach the workload cluster to look for the machine's Node: %w", err)
	}
	node := &corev1.Node{}
	if err := wc.Get(ctx, client.ObjectKey{Name: nodeName(sm)}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("looking for the machine's Node %s: %w", nodeName(sm), err)
	}
	booted := node.Annotations[nodepoolv1.AnnotationBootedPayload]
	if node.Spec.ProviderID != sm.Spec.ProviderID || node.Spec.ProviderID != providerID(sm) || booted == "" {
		return nil
	}
	sm.Status.BootedPayload = booted
	labels := map[string]string{}
	for k, v := range node.Labels {
		if strings.HasPrefix(k, payloadLabelDomain) {
			labels[k] = v
		}
	}
	sm.Status.NodeLabels = labels
	log.Info("Adopted a running machine from its Node", "node", node.Name, "payload", payload.Short(booted))
	return nil
}
