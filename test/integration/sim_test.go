package integration

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

func simSchemes() []func(*runtime.Scheme) error {
	return []func(*runtime.Scheme) error{sim.AddToScheme}
}

// startSim runs the sim provider in its own manager, as a provider runs.
func startSim() error {
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: sim.CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return err
	}
	if err := sim.SetupWithManager(env.Context(), mgr, sim.Options{InitialRetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second}); err != nil {
		return err
	}
	env.Run(mgr)
	return nil
}

func createCluster(t *testing.T, ns, name string) {
	t.Helper()
	if _, err := simtest.CreateCluster(context.Background(), env.Client, ns, name); err != nil {
		t.Fatal(err)
	}
}

func createTemplate(t *testing.T, ns, name string) {
	t.Helper()
	if err := simtest.CreateMachineTemplate(context.Background(), env.Client, ns, name, simv1.SimMachineSpec{}); err != nil {
		t.Fatal(err)
	}
}

func templateRef(name string) nodepoolv1.TemplateReference {
	return nodepoolv1.TemplateReference{APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: name}
}
