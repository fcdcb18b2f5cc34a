package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// `rollout resume` asks the controller to resume the rollout the person
// saw halted: the request names its revision (status.rollout.revision).
// A request another person wrote between its read and its patch (a resume
// of an older revision) is replaced by the one for the rollout now halted.
func TestResumeAsksForTheRevisionItSawHalted(t *testing.T) {
	ctx := context.Background()
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers"}}
	pool.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHalted, Revision: 3}
	pool.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonDrainHalted}}
	patches := 0
	var c client.Client
	c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool).WithStatusSubresource(pool).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, w client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			if patches == 1 { // another person's resume, of an older revision
				now := &nodepoolv1.NodePool{}
				if err := w.Get(ctx, client.ObjectKeyFromObject(obj), now); err != nil {
					return err
				}
				now.Annotations = map[string]string{nodepoolv1.AnnotationResume: "2"}
				if err := w.Update(ctx, now); err != nil {
					return err
				}
			}
			return w.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	var out bytes.Buffer
	o := &Options{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}, client: c,
		ConfigFlags: &genericclioptions.ConfigFlags{Namespace: ptr.To("team-a")}}
	cmd := newResumeCommand(o)
	cmd.SetArgs([]string{"workers"})
	cmd.SetContext(ctx)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("rollout resume: %v\n%s", err, out.String())
	}
	got := &nodepoolv1.NodePool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
		t.Fatal(err)
	}
	if v := got.Annotations[nodepoolv1.AnnotationResume]; v != "3" {
		t.Errorf("after resume the request is %q, want revision 3, the rollout status.rollout names", v)
	}
	if !strings.Contains(out.String(), "drain halt") || !strings.Contains(out.String(), "revision 3") {
		t.Errorf("resume said %q, want the drain halt of revision 3 named", out.String())
	}
}
