// Package gather reads a pool's inputs from the API server and hands them
// to inputs.Assembly, which validates and normalises them. It is the only
// part of the inputs that does I/O; the engine never imports it.
package gather

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
)

// Gather reads, validates and normalises every input of a pool's payload:
// the NodePool's spec, its user config ConfigMaps, pull secret and trust
// bundle, the CAPI Cluster, the management config, the infrastructure
// template, and the controller settings. Call it once per reconcile.
//
// A problem with the pool's inputs is returned as one or more
// *inputs.ConfigError (joined); use inputs.Reason(err) for the condition
// reason. Any other error is transient (the API server could not be read):
// retry.
func Gather(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, s inputs.Settings) (*inputs.Inputs, error) {
	a, err := inputs.NewAssembly(pool, s)
	if err != nil {
		return nil, err
	}
	g := &gatherer{c: c, a: a}
	mcKey := s.ManagementConfigKey()
	steps := []func(context.Context, *nodepoolv1.NodePool) error{
		g.gatherUserConfigs,
		g.gatherPullSecret,
		g.gatherTrustBundle,
		g.gatherCluster,
		func(ctx context.Context, _ *nodepoolv1.NodePool) error {
			return g.gatherManagementConfig(ctx, mcKey)
		},
		g.gatherTemplate,
	}
	for _, step := range steps {
		if err := step(ctx, pool); err != nil {
			return nil, err
		}
	}
	return a.Done()
}

// gatherer reads a pool's objects into its assembly.
type gatherer struct {
	c client.Reader
	a *inputs.Assembly
}

// get reads an object of the pool's namespace. found is false when it does
// not exist (recorded with hint); err is a transient error.
func (g *gatherer) get(ctx context.Context, kind, name string, obj client.Object, hint string) (found bool, err error) {
	key := types.NamespacedName{Namespace: g.a.Pool().Namespace, Name: name}
	if err := g.c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			g.a.Missing(kind, name, hint)
			return false, nil
		}
		return false, fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	return true, nil
}

func (g *gatherer) gatherUserConfigs(ctx context.Context, pool *nodepoolv1.NodePool) error {
	var sets []inputs.ConfigMapDocuments
	ok := true
	for _, ref := range pool.Spec.Config {
		cm := &corev1.ConfigMap{}
		found, err := g.get(ctx, "ConfigMap", ref.Name, cm, "create it or remove it from spec.config")
		if err != nil {
			return err
		}
		if !found {
			ok = false
			continue
		}
		docs, parsed := g.a.UserConfig(cm)
		if !parsed {
			ok = false
			continue
		}
		sets = append(sets, docs)
	}
	if !ok {
		return nil
	}
	return g.a.UserConfigs(sets)
}

func (g *gatherer) gatherPullSecret(ctx context.Context, pool *nodepoolv1.NodePool) error {
	if pool.Spec.PullSecretRef == nil {
		return nil
	}
	s := &corev1.Secret{}
	found, err := g.get(ctx, "Secret", pool.Spec.PullSecretRef.Name, s, "create it or fix spec.pullSecretRef")
	if err != nil || !found {
		return err
	}
	g.a.PullSecret(s)
	return nil
}

func (g *gatherer) gatherTrustBundle(ctx context.Context, pool *nodepoolv1.NodePool) error {
	if pool.Spec.AdditionalTrustBundleRef == nil {
		return nil
	}
	cm := &corev1.ConfigMap{}
	found, err := g.get(ctx, "ConfigMap", pool.Spec.AdditionalTrustBundleRef.Name, cm, "create it or fix spec.additionalTrustBundleRef")
	if err != nil || !found {
		return err
	}
	g.a.TrustBundle(cm)
	return nil
}

func (g *gatherer) gatherCluster(ctx context.Context, pool *nodepoolv1.NodePool) error {
	cluster := &clusterv1.Cluster{}
	key := types.NamespacedName{Namespace: g.a.Pool().Namespace, Name: pool.Spec.ClusterName}
	if err := g.c.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			g.a.ClusterMissing(key)
			return nil
		}
		return fmt.Errorf("reading Cluster %s: %w", key, err)
	}
	g.a.Cluster(cluster)
	return nil
}

func (g *gatherer) gatherManagementConfig(ctx context.Context, key types.NamespacedName) error {
	cm := &corev1.ConfigMap{}
	if err := g.c.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			g.a.ManagementConfigMissing(key)
			return nil
		}
		return fmt.Errorf("reading management config ConfigMap %s: %w", key, err)
	}
	g.a.ManagementConfig(cm)
	return nil
}
