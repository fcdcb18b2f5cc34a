package cli

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// scheme knows what the plugin reads: NodePools, Cluster API core, core
// and apps objects (ControllerRevisions), CustomResourceDefinitions.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, nodepoolv1.AddToScheme, apiextensionsv1.AddToScheme, appsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// kubeClient returns a client of the cluster the flags point at.
func (o *Options) kubeClient() (client.Client, error) {
	if o.client != nil {
		return o.client, nil
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, unreachableError(fmt.Errorf("reading the kubeconfig: %w", err))
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, unreachableError(fmt.Errorf("connecting to the API server %s: %w", cfg.Host, err))
	}
	o.client = c
	return c, nil
}

// namespace is -n, or the kubeconfig context's namespace, or "default".
func (o *Options) namespace() (string, error) {
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", unreachableError(fmt.Errorf("reading the namespace from the kubeconfig: %w", err))
	}
	return ns, nil
}

// getPool reads the NodePool name in the current namespace.
func (o *Options) getPool(ctx context.Context, name string) (client.Client, *nodepoolv1.NodePool, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, nil, err
	}
	pool := &nodepoolv1.NodePool{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, unreachableError(fmt.Errorf("NodePool %s/%s not found: check the name and the namespace (-n)", ns, name))
		}
		return nil, nil, fmt.Errorf("reading NodePool %s/%s: %w", ns, name, err)
	}
	return c, pool, nil
}

// poolRef is how a pool is named in messages, as kubectl names objects.
func poolRef(p *nodepoolv1.NodePool) string {
	return "nodepool.nodepool.dev/" + p.Name
}
