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

// `rollout resume` removes and rewrites annotations the controller and
// other people write too (the halts). Its patch is conditional on the
// pool it read: a halt written between its read and its patch (here a
// drain halt of another machine) makes the patch conflict, and resume
// reads the pool again and resumes what the pool says now. Without the
// condition the patch would write the old halt's value, marked resumed,
// over the newer one.
func TestResumeKeepsANewerHaltWrittenBetweenItsReadAndItsPatch(t *testing.T) {
	ctx := context.Background()
	const older, newer = "team-a/workers-abc/m1", "team-a/workers-abc/m2"
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers", Annotations: map[string]string{
		nodepoolv1.AnnotationDrainHalted: older}}}
	patches := 0
	var c client.Client
	c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, w client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			if patches == 1 { // the controller halts again, on another machine
				now := &nodepoolv1.NodePool{}
				if err := w.Get(ctx, client.ObjectKeyFromObject(obj), now); err != nil {
					return err
				}
				now.Annotations[nodepoolv1.AnnotationDrainHalted] = newer
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
	if v := got.Annotations[nodepoolv1.AnnotationDrainHalted]; !strings.HasPrefix(v, newer) {
		t.Errorf("after resume the pool's drain halt is %q, want the newer halt %q kept (resumed): the patch overwrote a value it did not read", v, newer)
	}
	if patches != 2 {
		t.Errorf("%d patches, want 2 (one conflict, one after reading the pool again)", patches)
	}
}
