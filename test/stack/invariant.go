package stack

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/harness"
)

// referenceChecker watches every deletion of a pool's Secret and records a
// violation when a MachineDeployment, MachineSet or Machine still references
// it as bootstrap data. It runs through every test.
type referenceChecker struct {
	mu    sync.Mutex
	found []string
}

func startReferenceChecker(env *harness.Env) *referenceChecker {
	rc := &referenceChecker{}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	w, err := cs.CoreV1().Secrets("").Watch(env.Context(), listOptions(nodepoolv1.LabelPool))
	if err != nil {
		rc.found = append(rc.found, "cannot watch Secrets: "+err.Error())
		return rc
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			s, ok := ev.Object.(*corev1.Secret)
			if !ok {
				continue
			}
			if ref := referencedBy(env.Context(), env.Client, s); ref != "" {
				rc.mu.Lock()
				rc.found = append(rc.found, fmt.Sprintf("%s/%s (used by %s)", s.Namespace, s.Name, ref))
				rc.mu.Unlock()
			}
		}
	}()
	return rc
}

func (rc *referenceChecker) violations() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.found...)
}

func referencedBy(ctx context.Context, c client.Client, s *corev1.Secret) string {
	ns := client.InNamespace(s.Namespace)
	// A token is used through the user-data of the same rollout hash.
	name := strings.Replace(s.Name, "-token-", "-userdata-", 1)
	uses := func(n *string) bool { return ptr.Deref(n, "") == name }
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, ns); err == nil {
		for _, o := range mds.Items {
			if uses(o.Spec.Template.Spec.Bootstrap.DataSecretName) {
				return "MachineDeployment " + o.Name
			}
		}
	}
	mss := &clusterv1.MachineSetList{}
	if err := c.List(ctx, mss, ns); err == nil {
		for _, o := range mss.Items {
			if uses(o.Spec.Template.Spec.Bootstrap.DataSecretName) {
				return "MachineSet " + o.Name
			}
		}
	}
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, ns); err == nil {
		for _, o := range ms.Items {
			if o.DeletionTimestamp.IsZero() && uses(o.Spec.Bootstrap.DataSecretName) {
				return "Machine " + o.Name
			}
		}
	}
	return ""
}

var _ runtime.Object = &corev1.Secret{}

func listOptions(labelExists string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: labelExists}
}
