package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/config"
)

// The identities the admission policies name, as a release runs them: the
// dev environment's controllers run in process with the administrator's
// credentials, impersonating these users (with the administrator's
// groups), so the policies tell them apart as they do in production.
const (
	controllerUser    = "system:serviceaccount:nodepool-system:nodepool-controller"
	clusterAPIUser    = "system:serviceaccount:capi-system:capi-manager"
	payloadServerUser = "system:serviceaccount:nodepool-system:nodepool-payload-server"
)

// as is cfg acting as user.
func as(cfg *rest.Config, user string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	return c
}

// installPolicies applies the admission policies a release installs (the
// embedded files, unchanged).
func installPolicies(ctx context.Context, c client.Client) error {
	for _, f := range config.PolicyFiles {
		b, err := fs.ReadFile(config.Policies, f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("parsing config/%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("nodepool-dev"), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}
