package devenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/inputs"
)

// forecast asks `kubectl nodepool fleet forecast` when the demo's pool
// would run another proxy image rolled out by a FleetRollout in two
// waves, without applying either: the management config edit and the
// FleetRollout are files, laid over the cluster.
func (d *demo) forecast(ctx context.Context) error {
	key := client.ObjectKey{Namespace: inputs.DefaultManagementConfig.Namespace, Name: inputs.DefaultManagementConfig.Name}
	cm := &corev1.ConfigMap{}
	if err := d.c.Get(ctx, key, cm); err != nil {
		return err
	}
	mc, err := inputs.ParseManagementConfig([]byte(cm.Data[inputs.ManagementConfigKey]))
	if err != nil {
		return fmt.Errorf("the management config %s is not valid: %w", key, err)
	}
	mc.APIServerProxyImage = ProxyImage(time.Now().Format(time.RFC3339Nano) + "-forecast")
	b, err := yaml.Marshal(mc)
	if err != nil {
		return err
	}
	edited := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string]string{inputs.ManagementConfigKey: string(b)}}
	fr := &nodepoolv1.FleetRollout{TypeMeta: metav1.TypeMeta{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "FleetRollout"},
		ObjectMeta: metav1.ObjectMeta{Name: d.o.Pool + "-proxy"},
		Spec: nodepoolv1.FleetRolloutSpec{Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")},
			Soak: &metav1.Duration{Duration: 10 * time.Minute}}}
	dir, err := os.MkdirTemp("", "nodepool-demo-forecast")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files := map[string]any{"management-config.yaml": edited, "fleet-rollout.yaml": fr}
	for name, obj := range files {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), y, 0o600); err != nil {
			return err
		}
	}
	d.begin("Forecast the next platform change, without applying it (another proxy image; a FleetRollout in waves [1, 100%], soak 10m)",
		"$ kubectl nodepool fleet forecast -n "+d.o.Namespace+" -f management-config.yaml --fleet-rollout fleet-rollout.yaml")
	var out, errOut bytes.Buffer
	code := cli.Run(ctx, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		[]string{"--kubeconfig", d.o.Kubeconfig, "-n", d.o.Namespace, "fleet", "forecast",
			"-f", filepath.Join(dir, "management-config.yaml"), "--fleet-rollout", filepath.Join(dir, "fleet-rollout.yaml")})
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		d.say("%s", l)
	}
	if code != 0 && code != cli.ExitNeverConverges {
		return fmt.Errorf("kubectl nodepool fleet forecast: exit %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	d.say("the engine ran each pool's windows, policy and history in simulated time; nothing was written (exit %d).", code)
	return nil
}
