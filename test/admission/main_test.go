package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/process"
)

var env *harness.Env

func TestMain(m *testing.M) { os.Exit(process.RunSuite(m, "test/admission", &env, setup, nil)) }

// setup starts the API server alone and applies the shipped policies.
func setup() error {
	ctx := context.Background()
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if env, err = harness.Start(ctx, harness.Options{WithoutCAPIControllers: true}); err != nil {
		return err
	}
	objs, err := decode(filepath.Join(root, "config", "rbac", "machinedeployment_policy.yaml"))
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("admission-test"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// decode reads the objects of a YAML file of several documents.
func decode(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
