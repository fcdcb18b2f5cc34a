package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

func newUndoCommand(o *Options) *cobra.Command {
	var (
		toRevision int64
		force      bool
	)
	cmd := &cobra.Command{
		Use:   "undo POOL",
		Short: "Roll a pool back to the spec of an earlier rollout",
		Long: `Restore the owner-facing spec a NodePool had at an earlier rollout: release,
config, pullSecretRef, additionalTrustBundleRef, proxy, registryMirrors,
infrastructureTemplateRef, nodeLabels, taints and nodeDrainTimeout. Replicas,
autoScaling and spec.management (strategy, pause, rolloutAfter, policy) stay as
they are, as kubectl rollout undo leaves a Deployment's replicas and strategy.

The record keeps a digest of every ConfigMap and Secret that rollout read. If one
of them is gone or its content changed since, the restored spec would not give
the nodes of that revision: undo refuses and names each one, unless --force.

Without --to-revision, undo goes to the newest earlier revision whose rollout
hash differs from the newest one (a forced rollout re-runs the same intent, so
it is skipped).`,
		Example: `  # Go back to the previous configuration.
  kubectl nodepool rollout undo workers

  # Go back to revision 2, even though a ConfigMap it used changed since.
  kubectl nodepool rollout undo workers --to-revision 2 --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.undo(cmd.Context(), args[0], toRevision, force)
		},
	}
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "the revision to go back to; 0 means the previous one")
	cmd.Flags().BoolVar(&force, "force", false, "restore the spec even if ConfigMaps or Secrets it references changed or are gone since")
	return cmd
}

func (o *Options) undo(ctx context.Context, name string, toRevision int64, force bool) error {
	c, pool, err := o.getPool(ctx, name)
	if err != nil {
		return err
	}
	entries, err := revisions(ctx, c, pool)
	if err != nil {
		return err
	}
	var e history.Entry
	if toRevision != 0 {
		if e, err = findRevision(pool, entries, toRevision); err != nil {
			return err
		}
	} else {
		if e, err = previousRevision(pool, entries); err != nil {
			return err
		}
	}
	var stale []string
	for _, s := range e.Sources {
		st, err := sourceState(ctx, c, pool.Namespace, s)
		if err != nil {
			return err
		}
		switch st.State {
		case SourceMissing:
			stale = append(stale, fmt.Sprintf("%s %s/%s no longer exists", s.Kind, pool.Namespace, s.Name))
		case SourceUnreadable:
			stale = append(stale, fmt.Sprintf("%s %s/%s cannot be compared with revision %d: %s", s.Kind, pool.Namespace, s.Name, e.Revision, st.Reason))
		case SourceChanged:
			stale = append(stale, fmt.Sprintf("%s %s/%s changed since revision %d (recorded %s, now %s)", s.Kind, pool.Namespace, s.Name, e.Revision, shortDigest(s.Digest), shortDigest(st.Current)))
		}
	}
	if len(stale) > 0 && !force {
		return fmt.Errorf("refusing to roll %s back to revision %d: its spec would not give the nodes of that revision:\n  %s\nrestore their content first, or pass --force to restore the spec anyway",
			poolRef(pool), e.Revision, strings.Join(stale, "\n  "))
	}
	before := pool.DeepCopy()
	restoreOwnerSpec(&pool.Spec, &e.Spec)
	if equality.Semantic.DeepEqual(before.Spec, pool.Spec) {
		return o.done(pool, "%s skipped rollback (the spec already matches revision %d)\n", poolRef(pool), e.Revision)
	}
	if err := c.Patch(ctx, pool, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("restoring the spec of revision %d on NodePool %s/%s: %w", e.Revision, pool.Namespace, pool.Name, err)
	}
	for _, s := range stale {
		fmt.Fprintln(o.ErrOut, "Warning:", s)
	}
	return o.done(pool, "%s rolled back to revision %d\n", poolRef(pool), e.Revision)
}

// previousRevision is the newest revision before the newest one with
// another rollout hash.
func previousRevision(pool *nodepoolv1.NodePool, entries []history.Entry) (history.Entry, error) {
	if len(entries) == 0 {
		return history.Entry{}, fmt.Errorf("%s has no recorded rollout to go back to", poolRef(pool))
	}
	newest := entries[len(entries)-1]
	for i := len(entries) - 2; i >= 0; i-- {
		if entries[i].RolloutHash != newest.RolloutHash {
			return entries[i], nil
		}
	}
	return history.Entry{}, fmt.Errorf("%s has no earlier revision with another rollout hash than revision %d: nothing to go back to (see kubectl nodepool rollout history %s)", poolRef(pool), newest.Revision, pool.Name)
}

// restoreOwnerSpec copies the owner-facing fields of a recorded spec: what
// the nodes are made of and carry. Size, cluster and management are left.
func restoreOwnerSpec(dst, rec *nodepoolv1.NodePoolSpec) {
	r := rec.DeepCopy()
	dst.Release = r.Release
	dst.Config = r.Config
	dst.PullSecretRef = r.PullSecretRef
	dst.AdditionalTrustBundleRef = r.AdditionalTrustBundleRef
	dst.Proxy = r.Proxy
	dst.RegistryMirrors = r.RegistryMirrors
	dst.InfrastructureTemplateRef = r.InfrastructureTemplateRef
	dst.NodeLabels = r.NodeLabels
	dst.Taints = r.Taints
	dst.NodeDrainTimeout = r.NodeDrainTimeout
}
