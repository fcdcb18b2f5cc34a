package integration

import (
	"context"
	"testing"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

func createCluster(t *testing.T, ns, name string) {
	t.Helper()
	if err := stack.CreateCluster(context.Background(), env.Client, ns, name); err != nil {
		t.Fatal(err)
	}
}

func createTemplate(t *testing.T, ns, name string) {
	t.Helper()
	if err := stack.CreateTemplate(context.Background(), env.Client, ns, name); err != nil {
		t.Fatal(err)
	}
}

func templateRef(name string) nodepoolv1.TemplateReference { return stack.TemplateRef(name) }
