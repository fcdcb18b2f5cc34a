package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
)

// A platform bump (a change of the management config) drifts every pool
// at once. It is reported once, by a ManagementConfigChanged event on the
// management config ConfigMap naming what changed, not by an event on
// each pool: at 10,000 pools that would be 10,000 events saying the same
// thing, none of which a pool's owner must act on. Each pool still shows
// its drift in ConfigUpdatePending, status.pendingManagementChanges and
// the drift metrics; a change in a pool's own namespace (its pull secret's
// or trust bundle's content) is an event on the pool
// (inputs.Component.PoolOwn). In a sharded fleet the shard given
// --fleet-rollouts announces it (one shard only; the others say nothing),
// as it runs the fleet's rollouts.

// platformEvents is the leader's runnable that watches the management
// config and emits the event when its content changes. The first version
// it reads after starting is its reference: a change made while no
// controller ran is not reported (the pools' conditions show it).
func platformEvents(mgr ctrl.Manager, r *Reconciler) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		key := r.Settings.Inputs.ManagementConfigKey()
		inf, err := mgr.GetCache().GetInformer(ctx, configMapMetadata())
		if err != nil {
			return fmt.Errorf("watching the management config: %w", err)
		}
		changed := make(chan struct{}, 1)
		poke := func(o any) {
			if m, ok := o.(metav1.Object); ok && m.GetNamespace() == key.Namespace && m.GetName() == key.Name {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }})
		if err != nil {
			return err
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
		log := ctrl.Log.WithName("platform-events")
		var last *inputs.ManagementConfig
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			}
			cm := &corev1.ConfigMap{}
			if err := r.APIReader.Get(ctx, key, cm); err != nil {
				log.V(1).Info("management config not readable", "reason", err.Error())
				continue
			}
			mc, err := inputs.ParseManagementConfig([]byte(cm.Data[inputs.ManagementConfigKey]))
			if err != nil {
				continue // invalid: each pool reports it
			}
			if last != nil {
				if fields := managementChanges(*last, mc); len(fields) > 0 {
					r.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, nodepoolv1.EventManagementConfigChanged, "Observe",
						"%s changed: no machine is replaced; every pool whose nodes run the earlier value reports it as pending drift (ConfigUpdatePending, `kubectl nodepool fleet -A`) until its next rollout or a FleetRollout",
						strings.Join(fields, ", "))
				}
			}
			last = &mc
		}
	})
}

// managementChanges names the fields of the management config that differ.
func managementChanges(a, b inputs.ManagementConfig) []string {
	var out []string
	for name, same := range map[string]bool{
		"apiServerProxyImage": a.APIServerProxyImage == b.APIServerProxyImage,
		"registryOverrides":   reflect.DeepEqual(a.RegistryOverrides, b.RegistryOverrides),
		"noProxy":             reflect.DeepEqual(a.NoProxy, b.NoProxy),
		"metadataAddress":     a.MetadataAddress == b.MetadataAddress,
	} {
		if !same {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
