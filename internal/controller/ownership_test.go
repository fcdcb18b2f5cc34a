package controller

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestCreateOwnedNeverAdoptsAnotherOwnersObject(t *testing.T) {
	scheme, pool := testPool()
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers-token-abc"}, Data: map[string][]byte{"k": []byte("theirs")}}
	ours := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers-payload-abc"}}
	if err := controllerutil.SetControllerReference(pool, ours, scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(foreign, ours).Build()
	r := &Reconciler{Client: c, APIReader: c}
	ctx := context.Background()

	err := r.createOwned(ctx, pool, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: foreign.Name}}, "Secret")
	if !isConflict(err) {
		t.Fatalf("err = %v, want a name conflict", err)
	}
	got := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || string(got.Data["k"]) != "theirs" {
		t.Errorf("the foreign Secret was changed: %+v", got)
	}
	if err := r.createOwned(ctx, pool, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ours.Name}}, "Secret"); !errors.Is(err, errNotCached) {
		t.Errorf("err = %v, want errNotCached for one of the pool's own", err)
	}
	if err := r.createOwned(ctx, pool, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers-userdata-abc"}}, "Secret"); err != nil {
		t.Errorf("creating a new Secret: %v", err)
	}
}

// testPool is a scheme with client-go's and nodepool's types, and a pool
// ns/workers to own objects.
func testPool() (*runtime.Scheme, *nodepoolv1.NodePool) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nodepoolv1.AddToScheme(scheme)
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers", UID: "pool-uid"}}
	pool.SetGroupVersionKind(nodepoolv1.GroupVersion.WithKind("NodePool"))
	return scheme, pool
}
