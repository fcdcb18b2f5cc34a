package devenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/capi"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// DemoOptions configure `nodepool dev demo`.
type DemoOptions struct {
	// Kubeconfig reaches the dev environment (<data-dir>/kubeconfig).
	Kubeconfig string
	// Namespace, Cluster and Template are those `dev up` makes.
	Namespace, Cluster, Template string
	// Pool is the demo's NodePool; an earlier one is deleted first.
	Pool string
	// Yes plays every step without waiting for Enter.
	Yes bool
	// Hold is how long the demo watches that platform drift replaces nothing.
	Hold time.Duration
	// StepTimeout bounds each wait.
	StepTimeout time.Duration
}

// demo plays the scenario.
type demo struct {
	o      DemoOptions
	c      client.Client
	out    io.Writer
	in     *bufio.Reader
	pause  bool
	key    client.ObjectKey
	config string // the demo's ConfigMap
	step   int
}

// Demo plays the narrated scenario against a running dev environment: a
// pool of 3, platform drift that replaces nothing, a scale-up that matches
// the running nodes, an owner change that rolls, a forced restart, the
// rollout history, a forecast of the next platform change, a health gate,
// an InPlace pool updated without replacing machines, and a drain a
// PodDisruptionBudget blocks.
func Demo(ctx context.Context, o DemoOptions, in io.Reader, out io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no dev environment: %s does not exist; start one with `make dev` (nodepool dev up) in another terminal, or pass --kubeconfig", o.Kubeconfig)
		}
		return fmt.Errorf("reading %s: %w", o.Kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{capi.AddToScheme, nodepoolv1.AddToScheme, simv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	d := &demo{o: o, c: c, out: out, in: bufio.NewReader(in), pause: !o.Yes && isTerminal(in),
		key: client.ObjectKey{Namespace: o.Namespace, Name: o.Pool}, config: o.Pool + "-chrony"}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Cluster}, &clusterv1.Cluster{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster %s/%s does not exist: run the demo against `nodepool dev up`, which makes it", o.Namespace, o.Cluster)
		}
		return fmt.Errorf("the dev environment at %s does not answer (%v): is `make dev` running?", cfg.Host, err)
	}
	fmt.Fprintf(out, "nodepool demo: a NodePool %s on Cluster %s/%s (simulated machines), API server %s\n", o.Pool, o.Namespace, o.Cluster, cfg.Host)
	for _, step := range []func(context.Context) error{d.reset, d.create, d.drift, d.scale, d.change, d.restart, d.history, d.forecast, d.healthGate, d.inPlace, d.drain} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nThat was the tour. The pools stay: `kubectl -n %s get nodepools` lists them, `kubectl nodepool rollout history %s -n %s`\n"+
		"(bin/kubectl-nodepool on your PATH) shows a history, `kubectl -n %s delete nodepool %s %s %s` removes them.\n",
		o.Namespace, o.Pool, o.Namespace, o.Namespace, o.Pool, o.Pool+"-edge", o.Pool+"-guarded")
	return nil
}

// begin starts a numbered step, after Enter when interactive.
func (d *demo) begin(title string, lines ...string) {
	if d.pause && d.step > 0 {
		fmt.Fprint(d.out, "\n[Enter] next step ")
		_, _ = d.in.ReadString('\n')
	}
	d.step++
	fmt.Fprintf(d.out, "\n%d. %s\n", d.step, title)
	for _, l := range lines {
		fmt.Fprintf(d.out, "   %s\n", l)
	}
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "   "+format+"\n", args...)
}

// reset deletes the pool of an earlier run and writes the demo's config.
func (d *demo) reset(ctx context.Context) error {
	pool := &nodepoolv1.NodePool{}
	err := d.c.Get(ctx, d.key, pool)
	if err == nil {
		fmt.Fprintf(d.out, "   (deleting the NodePool %s of an earlier run and waiting for its machines to go)\n", d.o.Pool)
		if err := d.c.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
			return err
		}
		if _, err := d.waitFor(ctx, "the earlier pool to be gone", func(s poolState, err error) bool {
			return apierrors.IsNotFound(err)
		}); err != nil {
			return err
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	edge := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: d.edgePool()}}
	if err := d.c.Delete(ctx, edge); client.IgnoreNotFound(err) != nil {
		return err
	} else if err == nil {
		fmt.Fprintf(d.out, "   (deleting the NodePool %s of an earlier run and waiting for its machines to go)\n", edge.Name)
		if _, err := d.waitForPool(ctx, client.ObjectKeyFromObject(edge), "the earlier InPlace pool to be gone", func(s poolState, err error) bool {
			return apierrors.IsNotFound(err)
		}); err != nil {
			return err
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: d.config}}
	return d.setConfig(ctx, cm, "time.example.com")
}

// chrony is an Ignition fragment writing /etc/chrony.conf.
func chrony(server string) string {
	return fmt.Sprintf(`ignition: {version: 3.4.0}
storage:
  files:
    - path: /etc/chrony.conf
      mode: 0644
      overwrite: true
      contents: {source: "data:,server%%20%s%%20iburst%%0A"}
`, server)
}

func (d *demo) setConfig(ctx context.Context, cm *corev1.ConfigMap, server string) error {
	err := d.c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = map[string]string{inputs.ConfigKey: chrony(server)}
		return d.c.Create(ctx, cm)
	case err != nil:
		return err
	}
	cm.Data = map[string]string{inputs.ConfigKey: chrony(server)}
	return d.c.Update(ctx, cm)
}

// newPool is the demo's NodePool name in its namespace: replicas machines
// of its cluster at release v1.36.3, with the user config config, the
// SimMachineTemplate template and management m.
func (d *demo) newPool(name, config, template string, replicas int32, m nodepoolv1.Management) *nodepoolv1.NodePool {
	return &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: name},
		Spec: nodepoolv1.NodePoolSpec{
			ClusterName: d.o.Cluster,
			Replicas:    ptr.To(replicas),
			Release:     nodepoolv1.Release{Version: "v1.36.3"},
			Config:      []nodepoolv1.LocalObjectReference{{Name: config}},
			InfrastructureTemplateRef: nodepoolv1.TemplateReference{
				APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: template,
			},
			Management: m,
		},
	}
}

func (d *demo) create(ctx context.Context) error {
	d.begin("Create a pool of 3",
		fmt.Sprintf("ConfigMap %s: an Ignition fragment writing /etc/chrony.conf (server time.example.com)", d.config),
		fmt.Sprintf("NodePool %s: replicas 3, release v1.36.3, config [%s], template SimMachineTemplate/%s", d.o.Pool, d.config, d.o.Template))
	pool := d.newPool(d.o.Pool, d.config, d.o.Template, 3, nodepoolv1.Management{})
	start := time.Now()
	if err := d.c.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating the NodePool: %w", err)
	}
	s, err := d.waitFor(ctx, "3 ready nodes on one payload", func(s poolState, err error) bool {
		return err == nil && s.settled(3)
	})
	if err != nil {
		return err
	}
	d.say("after %s: %d machines, each with a ready Node carrying its payload label:", time.Since(start).Round(time.Second), len(s.machines))
	d.nodes(s)
	d.say("%s", conditionLine(condition(s.pool, nodepoolv1.ConditionReady)))
	return nil
}

// nodes lists each machine's Node and payload label.
func (d *demo) nodes(s poolState) {
	for _, m := range s.machines {
		d.say("  %-28s %s=%s", m.node, nodepoolv1.LabelPayload, m.payload)
	}
}

func (d *demo) drift(ctx context.Context) error {
	before, err := observePool(ctx, d.c, d.key)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: inputs.DefaultManagementConfig.Namespace, Name: inputs.DefaultManagementConfig.Name}
	var from, to string
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cm := &corev1.ConfigMap{}
		if err := d.c.Get(ctx, key, cm); err != nil {
			return err
		}
		mc, err := inputs.ParseManagementConfig([]byte(cm.Data[inputs.ManagementConfigKey]))
		if err != nil {
			return fmt.Errorf("the management config %s is not valid (%w): fix it or restart `dev up` with a fresh --data-dir", key, err)
		}
		from = mc.APIServerProxyImage
		mc.APIServerProxyImage = ProxyImage(time.Now().Format(time.RFC3339Nano))
		to = mc.APIServerProxyImage
		b, err := yaml.Marshal(mc)
		if err != nil {
			return err
		}
		cm.Data[inputs.ManagementConfigKey] = string(b)
		return d.c.Update(ctx, cm)
	}); err != nil {
		return fmt.Errorf("updating the management config: %w", err)
	}
	d.begin("The platform bumps the API-server proxy image (a management component)",
		fmt.Sprintf("%s apiServerProxyImage: …%s → …%s", key, tailOf(from, 12), tailOf(to, 12)))
	s, err := d.waitFor(ctx, "ConfigUpdatePending naming apiserver-proxy", func(s poolState, err error) bool {
		c := condition(s.pool, nodepoolv1.ConditionConfigUpdatePending)
		return err == nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "apiserver-proxy")
	})
	if err != nil {
		return err
	}
	d.say("%s", conditionLine(condition(s.pool, nodepoolv1.ConditionConfigUpdatePending)))
	for _, p := range s.pool.Status.PendingManagementChanges {
		d.say("status.pendingManagementChanges: %s  current %s  desired %s", p.Component, tailOf(p.Current, 12), tailOf(p.Desired, 12))
	}
	deadline := time.Now().Add(d.o.Hold)
	for time.Now().Before(deadline) {
		s, err := observePool(ctx, d.c, d.key)
		if err != nil {
			return err
		}
		if s.countIn(before.uids()) != len(before.machines) || len(s.machines) != len(before.machines) || s.onlyPayload() != before.onlyPayload() {
			return fmt.Errorf("platform drift disturbed the pool: machines %d (of which %d from before), payloads %s", len(s.machines), s.countIn(before.uids()), payloadList(s.payloads()))
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	d.say("watched for %s: the same %d machines, every node still on %s. Nothing was replaced.", d.o.Hold, len(before.machines), before.onlyPayload())
	return nil
}

func (d *demo) scale(ctx context.Context) error {
	before, err := observePool(ctx, d.c, d.key)
	if err != nil {
		return err
	}
	d.begin("Scale to 5", "spec.replicas: 3 → 5, with the proxy image change still pending")
	start := time.Now()
	if err := d.update(ctx, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To[int32](5) }); err != nil {
		return err
	}
	s, err := d.waitFor(ctx, "5 ready nodes", func(s poolState, err error) bool {
		return err == nil && s.settled(5)
	})
	if err != nil {
		return err
	}
	d.nodes(s)
	d.say("after %s: %d machines (the %d from before kept); nodes by payload: %s.", time.Since(start).Round(time.Second), len(s.machines), s.countIn(before.uids()), payloadList(s.payloads()))
	if s.onlyPayload() == before.onlyPayload() {
		d.say("The new nodes booted the payload pinned for the running ones: the pool stays uniform, and the")
		d.say("new proxy image waits for the next rollout (ConfigUpdatePending=%s).", condition(s.pool, nodepoolv1.ConditionConfigUpdatePending).Status)
	}
	return nil
}

func (d *demo) change(ctx context.Context) error {
	before, err := observePool(ctx, d.c, d.key)
	if err != nil {
		return err
	}
	d.begin("The owner changes a config: a rollout",
		fmt.Sprintf("ConfigMap %s: server time.example.com → ntp.example.com (owner intent: the rollout hash changes)", d.config))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: d.config}}
	if err := d.setConfig(ctx, cm, "ntp.example.com"); err != nil {
		return err
	}
	s, took, err := d.rollout(ctx, before)
	if err != nil {
		return err
	}
	d.say("done in %s: %d new machines, nodes by payload: %s (was %s).", took.Round(time.Second), len(s.machines), payloadList(s.payloads()), before.onlyPayload())
	d.say("%s", conditionLine(condition(s.pool, nodepoolv1.ConditionConfigUpdatePending)))
	d.say("The pending proxy image rode along: a rollout delivers everything current.")
	return nil
}

func (d *demo) restart(ctx context.Context) error {
	before, err := observePool(ctx, d.c, d.key)
	if err != nil {
		return err
	}
	// The next whole second, as `kubectl nodepool rollout restart` writes:
	// after every machine that exists now.
	now := metav1.NewTime(time.Now().Truncate(time.Second).Add(time.Second))
	d.begin("Force a restart", fmt.Sprintf("spec.management.rolloutAfter = %s (what `kubectl nodepool rollout restart` does)", now.UTC().Format(time.RFC3339)))
	if err := d.update(ctx, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &now }); err != nil {
		return err
	}
	s, took, err := d.rollout(ctx, before)
	if err != nil {
		return err
	}
	same := "the same payload: nothing else changed"
	if s.onlyPayload() != before.onlyPayload() {
		same = "a new payload: it carries what the platform changed meanwhile"
	}
	d.say("done in %s: every machine created before %s replaced; nodes on %s, %s.", took.Round(time.Second), now.Format(time.TimeOnly), s.onlyPayload(), same)
	return nil
}

// rollout waits until every machine of before is replaced, printing a line
// whenever the progress changes.
func (d *demo) rollout(ctx context.Context, before poolState) (poolState, time.Duration, error) {
	old := before.uids()
	n := len(before.machines)
	start := time.Now()
	last := ""
	s, err := d.waitFor(ctx, "every machine replaced", func(s poolState, err error) bool {
		if err != nil {
			return false
		}
		oldLeft := s.countIn(old)
		line := fmt.Sprintf("machines %d (old %d, new %d)  ready nodes %d: %s  up to date %d/%d",
			len(s.machines), oldLeft, len(s.machines)-oldLeft, s.readyNodes(), payloadList(s.payloads()), s.pool.Status.UpdatedReplicas, n)
		if s.pool.Status.Updating != "" {
			line += "  updating " + s.pool.Status.Updating
		}
		if line != last {
			d.say("%6.1fs  %s", time.Since(start).Seconds(), line)
			last = line
		}
		return oldLeft == 0 && s.settled(n)
	})
	return s, time.Since(start), err
}

func (d *demo) history(ctx context.Context) error {
	d.begin("The history", fmt.Sprintf("every rollout is a ControllerRevision owned by the pool (kubectl get controllerrevisions -l %s=%s)", nodepoolv1.LabelPool, d.o.Pool))
	pool := &nodepoolv1.NodePool{}
	if err := d.c.Get(ctx, d.key, pool); err != nil {
		return err
	}
	revs := &appsv1.ControllerRevisionList{}
	if err := d.c.List(ctx, revs, client.InNamespace(d.o.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: d.o.Pool}); err != nil {
		return err
	}
	owned := history.Records(pool, revs.Items)
	d.say("%-4s %-10s %-17s %-9s %-6s %-10s %s", "REV", "INITIATOR", "PAYLOAD", "STARTED", "TOOK", "OUTCOME", "CHANGED")
	for i := range owned {
		e, err := history.Decode(&owned[i])
		if err != nil {
			return err
		}
		took := "-"
		if e.Completed != nil {
			took = e.Completed.Sub(e.Started).Round(time.Second).String()
		}
		changed := strings.Join(e.Changed, ",")
		switch {
		case e.Revision == 1:
			changed = "all (new pool)"
		case changed == "":
			changed = "-"
		}
		d.say("%-4d %-10s %-17s %-9s %-6s %-10s %s", e.Revision, e.Initiator, payload.Short(e.PayloadHash),
			e.Started.Local().Format(time.TimeOnly), took, e.Outcome, changed)
	}
	return nil
}

// update changes the pool, retrying conflicts.
func (d *demo) update(ctx context.Context, change func(*nodepoolv1.NodePool)) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		p := &nodepoolv1.NodePool{}
		if err := d.c.Get(ctx, d.key, p); err != nil {
			return err
		}
		change(p)
		return d.c.Update(ctx, p)
	})
}

// waitFor polls the pool until done says so, or the step times out.
func (d *demo) waitFor(ctx context.Context, what string, done func(poolState, error) bool) (poolState, error) {
	return d.waitForPool(ctx, d.key, what, done)
}

// waitForPool is waitFor for any pool.
func (d *demo) waitForPool(ctx context.Context, key client.ObjectKey, what string, done func(poolState, error) bool) (poolState, error) {
	deadline := time.Now().Add(d.o.StepTimeout)
	for {
		s, err := observePool(ctx, d.c, key)
		if done(s, err) {
			return s, nil
		}
		if time.Now().After(deadline) {
			detail := "the pool cannot be read: " + fmt.Sprint(err)
			if err == nil {
				detail = fmt.Sprintf("%d machines, ready nodes %d, by payload %s; %s", len(s.machines), s.readyNodes(), payloadList(s.payloads()),
					conditionLine(condition(s.pool, nodepoolv1.ConditionReady)))
			}
			return s, fmt.Errorf("timed out after %s waiting for %s (%s); see the dev environment's log (.dev/nodepool.log) or raise --step-timeout", d.o.StepTimeout, what, detail)
		}
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return s, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// tailOf returns the last n characters of s.
func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// defaultKubeconfig is the kubeconfig `dev up` writes into dataDir.
func defaultKubeconfig(dataDir string) string { return filepath.Join(dataDir, "kubeconfig") }
