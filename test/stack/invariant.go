package stack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/harness"
)

// ReferenceChecker watches every deletion of a pool's Secret and records a
// violation when a MachineDeployment, MachineSet or Machine still references
// it as bootstrap data. A suite starts it in its TestMain's setup (Start)
// and passes Check to Main, so it runs through every test.
type ReferenceChecker struct {
	mu    sync.Mutex
	found []string
}

// Start watches the pools' Secrets on env until env stops. A watch that
// cannot start is a violation: the suite fails rather than check nothing.
func (rc *ReferenceChecker) Start(env *harness.Env) error {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	w, err := cs.CoreV1().Secrets("").Watch(env.Context(), metav1.ListOptions{LabelSelector: nodepoolv1.LabelPool})
	if err != nil {
		rc.record("cannot watch Secrets: " + err.Error())
		return nil
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
				rc.record(fmt.Sprintf("%s/%s (used by %s)", s.Namespace, s.Name, ref))
			}
		}
	}()
	return nil
}

func (rc *ReferenceChecker) record(v string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.found = append(rc.found, v)
}

// Violations are the Secrets deleted while referenced, so far.
func (rc *ReferenceChecker) Violations() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.found...)
}

// Check is Main's check: a violation turns the tests' exit code into a
// failure.
func (rc *ReferenceChecker) Check(code int) int {
	if v := rc.Violations(); len(v) > 0 {
		fmt.Fprintln(os.Stderr, "INVARIANT VIOLATED: Secrets deleted while referenced:", v)
		return 1
	}
	return code
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
