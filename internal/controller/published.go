package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"nodepool.dev/nodepool/internal/settings"
)

// +kubebuilder:rbac:groups="",namespace=nodepool-system,resources=configmaps,verbs=create;patch

// publishSettings writes the settings `kubectl nodepool plan`, `diff` and
// `rollout status` need to decide as the controller does into the
// published-settings ConfigMap (internal/settings) once this replica
// leads, and checks it every minute, so an edit by hand is undone within
// one.
func publishSettings(mgr ctrl.Manager, s Settings) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		want := settings.Published{
			PayloadServerURL: s.Inputs.PayloadServerURL, PayloadServerCA: string(s.Inputs.PayloadServerCA),
			RendererVersion: s.Inputs.RendererVersion, ManagementConfig: s.Inputs.ManagementConfigKey().String(),
			TokenTTL: s.TokenTTL, CleanupGracePeriod: s.CleanupGracePeriod, NodeAgentTimeout: s.NodeAgentTimeout, ResyncPeriod: s.ResyncPeriod,
		}
		log := ctrl.Log.WithName("settings")
		c := mgr.GetClient()
		// The ConfigMap is read uncached and checked every minute (a
		// failed write is retried sooner): an edit by hand is undone.
		for {
			next := min(s.ResyncPeriod, time.Minute)
			if err := writeSettings(ctx, c, mgr.GetAPIReader(), s.PublishNamespace, want); err != nil {
				log.Error(err, "publishing the controller's settings", "configmap", s.PublishNamespace+"/"+settings.ConfigMapName)
				next = 2 * time.Second
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(next):
			}
		}
	}))
}

func writeSettings(ctx context.Context, c client.Client, r client.Reader, namespace string, want settings.Published) error {
	desired := settings.ConfigMap(namespace, want)
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKeyFromObject(desired), cm)
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, desired)
	case err != nil:
		return err
	}
	if equality.Semantic.DeepEqual(cm.Data, desired.Data) && equality.Semantic.DeepEqual(cm.Labels, desired.Labels) {
		return nil
	}
	before := cm.DeepCopy()
	cm.Data, cm.Labels = desired.Data, desired.Labels
	if err := c.Patch(ctx, cm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating: %w", err)
	}
	return nil
}
