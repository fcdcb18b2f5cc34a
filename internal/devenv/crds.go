package devenv

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"nodepool.dev/nodepool/config"
	"nodepool.dev/nodepool/internal/capi"
)

// installCRDs creates or updates the CRDs of Cluster API core, nodepool
// and the sim provider, all embedded in the binary, and waits until each is
// established.
func installCRDs(ctx context.Context, cfg *rest.Config) error {
	crds, err := capi.CRDs()
	if err != nil {
		return err
	}
	for _, dir := range config.CRDDirs {
		files, err := fs.Glob(config.CRDs, path.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("no CRDs embedded from config/%s: the binary was built without them", dir)
		}
		for _, f := range files {
			b, err := fs.ReadFile(config.CRDs, f)
			if err != nil {
				return err
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(bytes.TrimSpace(b), crd); err != nil {
				return fmt.Errorf("parsing the CRD config/%s: %w", f, err)
			}
			crds = append(crds, crd)
		}
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	for _, want := range crds {
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			have := &apiextensionsv1.CustomResourceDefinition{}
			err := c.Get(ctx, client.ObjectKey{Name: want.Name}, have)
			if apierrors.IsNotFound(err) {
				return c.Create(ctx, want.DeepCopy())
			} else if err != nil {
				return err
			}
			have.Spec = want.Spec
			have.Labels, have.Annotations = want.Labels, want.Annotations
			return c.Update(ctx, have)
		})
		if err != nil {
			return fmt.Errorf("installing the CRD %s: %w", want.Name, err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, want := range crds {
		for {
			have := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: want.Name}, have); err != nil {
				return err
			}
			if established(have) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the CRD %s is not established after a minute; see kube-apiserver.log in the data dir", want.Name)
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
