package install

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/observability"
	"nodepool.dev/nodepool/test/stack"
)

// TestTheAlertsAndTheDashboardNameOnlyExportedSeries scrapes the shipped
// controller and payload server, as Prometheus does, once they export
// every series config/prometheus reads: a health-gated pool with a
// maintenance window and a drift deadline, restarted by a fleet rollout
// (rollouts started and completed, the fleet rollout's series), then given
// pending drift (its trust bundle changed); and a pool held by a
// MachineDeployment of its name (reconcile errors, stage conflict). Every
// metric an alert or a dashboard query names must be in the scrapes, with
// every label the query needs. Then a real Prometheus scrapes them through
// the jobs the Prometheus Operator makes of the shipped ServiceMonitors and
// runs every alert and dashboard query (checkWithAnOperatorPrometheus):
// each pool's series keep the pool's namespace.
func TestTheAlertsAndTheDashboardNameOnlyExportedSeries(t *testing.T) {
	qs, err := observability.Queries()
	if err != nil {
		t.Fatal(err)
	}
	answers := observability.Analyse(t, qs)
	for _, a := range answers {
		if a.Error != "" {
			t.Fatalf("%s: %s does not parse: %s", a.Source, a.Expr, a.Error)
		}
	}
	ctx := context.Background()
	controllers := startDeployment(t, controllerName)
	payload := startDeployment(t, payloadName)

	ns := env.NewNamespace(t)
	if err := stack.CreateCluster(ctx, env.Client, ns, stack.ClusterName); err != nil {
		t.Fatal(err)
	}
	if err := simtest.CreateMachineTemplate(ctx, env.Client, ns, "small", simv1.SimMachineSpec{}); err != nil {
		t.Fatal(err)
	}
	bundle := func(name string) string {
		ca, err := testpki.NewCA(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(ca.PEM)
	}
	trust := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corp-ca"}, Data: map[string]string{inputs.TrustBundleKey: bundle("corp CA 1")}}
	for _, o := range []client.Object{stack.ConfigMap(ns, "chrony", stack.Chrony("time1.corp.example")), trust} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	p := stack.WorkersPool(ns, 1)
	p.Labels = map[string]string{"fleet": ns}
	p.Spec.AdditionalTrustBundleRef = &nodepoolv1.LocalObjectReference{Name: trust.Name}
	p.Spec.Management.Health = &nodepoolv1.Health{CanarySoak: &metav1.Duration{}, Soak: &metav1.Duration{}}
	p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{DriftDeadline: &metav1.Duration{Duration: 720 * time.Hour}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	clash := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clash", Labels: map[string]string{"team": "someone-else"}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: stack.ClusterName,
			Replicas:    ptr.To[int32](0),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.ClusterNameLabel: stack.ClusterName, "team": "someone-else"}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{clusterv1.ClusterNameLabel: stack.ClusterName, "team": "someone-else"}},
				Spec: clusterv1.MachineSpec{
					ClusterName:       stack.ClusterName,
					Version:           "v1.30.0",
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("someone-elses-data")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: p.Spec.InfrastructureTemplateRef.APIGroup, Kind: p.Spec.InfrastructureTemplateRef.Kind, Name: "small"},
				},
			},
		},
	}
	clashing := stack.WorkersPool(ns, 0)
	clashing.Name = clash.Name
	for _, o := range []client.Object{clash, clashing} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, p, "1 ready node", settled(1))

	// A fleet rollout restarts the pool.
	fr := &nodepoolv1.FleetRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-" + ns},
		Spec: nodepoolv1.FleetRolloutSpec{
			PoolSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": ns}},
			Action:       nodepoolv1.FleetActionRestart,
			Waves:        []intstr.IntOrString{intstr.FromString("100%")},
		},
	}
	if err := env.Client.Create(ctx, fr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, fr) })
	stack.WaitFor(t, timeout, "the fleet rollout complete", func() *nodepoolv1.FleetRollout {
		checkReplicas(t)
		out := &nodepoolv1.FleetRollout{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(fr), out); err != nil {
			t.Fatal(err)
		}
		return out
	}, func(fr *nodepoolv1.FleetRollout) bool { return fr.Status.Phase == nodepoolv1.FleetPhaseComplete },
		func(fr *nodepoolv1.FleetRollout) string { return string(fr.Status.Phase) + ": " + fr.Status.Message })

	// Then a maintenance window (a year away at most: no rollout waits for
	// it) and pending drift: the trust bundle's content is a management
	// component.
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance.Windows = []nodepoolv1.MaintenanceWindow{{Schedule: "0 3 1 1 *", Duration: metav1.Duration{Duration: time.Hour}}}
	})
	trust.Data[inputs.TrustBundleKey] = bundle("corp CA 2")
	if err := env.Client.Update(ctx, trust); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "trust-bundle drift pending", func(s state) bool {
		return slices.ContainsFunc(s.pool.Status.PendingManagementChanges, func(c nodepoolv1.PendingManagementChange) bool {
			return c.Component == inputs.TrustBundle.Name()
		}) && s.pool.Status.Maintenance != nil && s.pool.Status.Maintenance.NextWindow != nil
	})

	// The scrapes, until they export what the queries read (a series is set
	// at the reconcile after the status it says).
	var missing []string
	deadline := time.Now().Add(time.Minute)
	for {
		exported := observability.Exported{}
		for _, r := range controllers {
			scrape(t, exported, "http://"+r.Addrs["metrics"]+"/metrics")
		}
		for _, r := range payload {
			scrape(t, exported, "http://"+r.Addrs["probes"]+"/metrics")
		}
		missing = exported.Unexported(answers)
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if len(missing) > 0 {
		t.Errorf("config/prometheus names series the controller and payload server do not export:\n  %s", strings.Join(missing, "\n  "))
	}
	checkWithAnOperatorPrometheus(t, ns, answers, map[string][]*replica{controllerName: controllers, payloadName: payload})
	checkReplicas(t)
}

// scrape adds what url's /metrics exports to e.
func scrape(t *testing.T, e observability.Exported, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	if err := e.ParseScrape(resp.Body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
