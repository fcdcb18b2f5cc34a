package devenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// watch prints a line for each pool whose state changed, every
// StatusInterval, until ctx ends or a component fails.
func (e *env) watch(ctx context.Context) error {
	last := map[string]string{}
	tick := time.NewTicker(e.opts.StatusInterval)
	defer tick.Stop()
	first := true
	for {
		if err := e.cp.failed(); err != nil {
			return err
		}
		pools := &nodepoolv1.NodePoolList{}
		if err := e.client.List(ctx, pools); err != nil {
			if ctx.Err() == nil {
				e.log.Error(err, "listing NodePools for the status")
			}
		} else {
			seen := map[string]bool{}
			for i := range pools.Items {
				p := &pools.Items[i]
				key := p.Namespace + "/" + p.Name
				seen[key] = true
				if s := poolSummary(p); s != last[key] {
					fmt.Fprintf(e.out, "%s  %-20s %s\n", time.Now().Format(time.TimeOnly), key, s)
					last[key] = s
				}
			}
			for key := range last {
				if !seen[key] {
					fmt.Fprintf(e.out, "%s  %-20s deleted\n", time.Now().Format(time.TimeOnly), key)
					delete(last, key)
				}
			}
			if first && len(pools.Items) == 0 {
				fmt.Fprintf(e.out, "%s  no NodePool yet; pools and their nodes show here as they change\n", time.Now().Format(time.TimeOnly))
			}
			first = false
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(e.out, "stopping: controllers, payload server, kube-apiserver, etcd")
			return nil
		case err := <-e.errs:
			return err
		case <-tick.C:
		}
	}
}

// poolSummary is one short line of a pool's state.
func poolSummary(p *nodepoolv1.NodePool) string {
	var b strings.Builder
	want := int32(0)
	if p.Spec.Replicas != nil {
		want = *p.Spec.Replicas
	}
	fmt.Fprintf(&b, "%d/%d ready, %d up to date", p.Status.ReadyReplicas, want, p.Status.UpdatedReplicas)
	if p.Status.Version != "" {
		fmt.Fprintf(&b, ", %s", p.Status.Version)
	}
	if len(p.Status.Nodes) > 0 {
		nodes := make([]string, 0, len(p.Status.Nodes))
		for _, n := range p.Status.Nodes {
			nodes = append(nodes, fmt.Sprintf("%s×%d", n.Payload, n.Count))
		}
		sort.Strings(nodes)
		fmt.Fprintf(&b, ", nodes %s", strings.Join(nodes, " "))
	}
	if p.Status.Updating != "" {
		fmt.Fprintf(&b, ", updating %s", p.Status.Updating)
	}
	if len(p.Status.PendingManagementChanges) > 0 {
		var comps []string
		for _, c := range p.Status.PendingManagementChanges {
			comps = append(comps, c.Component)
		}
		fmt.Fprintf(&b, ", pending drift: %s", strings.Join(comps, ","))
	}
	for _, t := range []string{nodepoolv1.ConditionValidMachineConfig, nodepoolv1.ConditionValidGeneratedPayload, nodepoolv1.ConditionReconciliationActive} {
		if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil && c.Status == "False" {
			fmt.Fprintf(&b, ", %s=False (%s)", t, c.Reason)
		}
	}
	if !p.DeletionTimestamp.IsZero() {
		b.WriteString(", deleting")
	}
	return b.String()
}
