package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Shell completion: cobra's hidden __complete command (what `kubectl
// nodepool completion` scripts and kubectl_complete-nodepool run) asks
// these functions for the names a command takes, read from the cluster the
// flags point at (--kubeconfig, --context, -n). A failure completes
// nothing: a completion never prints an error into the shell.

// completionTimeout bounds one completion's requests: the shell waits.
const completionTimeout = 5 * time.Second

// Commands whose one argument is a NodePool of the namespace, or a
// FleetRollout, by their path under the plugin.
var (
	poolArgCommands         = []string{"rollout status", "rollout history", "rollout undo", "rollout restart", "rollout pause", "rollout resume", "rollout apply-pending", "diff"}
	fleetRolloutArgCommands = []string{"fleet rollout status", "fleet rollout pause", "fleet rollout resume", "fleet rollout cancel"}
	// revisionFlags are the flags that name a revision of the pool
	// given as the argument.
	revisionFlags = map[string]string{"rollout undo": "to-revision", "rollout history": "revision"}
)

// registerCompletions gives the commands under root their completion
// functions.
func (o *Options) registerCompletions(root *cobra.Command) error {
	byKey := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		byKey[commandKey(c)] = c
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	find := func(key string) (*cobra.Command, error) {
		if c := byKey[key]; c != nil {
			return c, nil
		}
		return nil, fmt.Errorf("completion for %q, which is no command", key)
	}
	for _, key := range poolArgCommands {
		c, err := find(key)
		if err != nil {
			return err
		}
		c.ValidArgsFunction = o.completeFirstArg(o.poolNames)
	}
	for _, key := range fleetRolloutArgCommands {
		c, err := find(key)
		if err != nil {
			return err
		}
		c.ValidArgsFunction = o.completeFirstArg(o.fleetRolloutNames)
	}
	for key, flag := range revisionFlags {
		c, err := find(key)
		if err != nil {
			return err
		}
		if err := c.RegisterFlagCompletionFunc(flag, o.completeRevisions); err != nil {
			return err
		}
	}
	fixed := []struct {
		key, flag string
		values    []string
	}{
		{"fleet", "sort-by", orderNames()},
		{"diff", "against", []string{AgainstNewNode, AgainstLatest}},
		{"fleet rollout", "action", []string{"apply-pending", "restart"}},
		{"fleet rollout", "held-pools", []string{"wait", "skip"}},
	}
	for _, f := range fixed {
		c, err := find(f.key)
		if err != nil {
			return err
		}
		if err := c.RegisterFlagCompletionFunc(f.flag, fixedCompletions(f.values)); err != nil {
			return err
		}
	}
	formats := append([]string{outputTable, outputWide}, newOutputFormats().allowed()...)
	if err := root.RegisterFlagCompletionFunc("output", fixedCompletions(formats)); err != nil {
		return err
	}
	return root.RegisterFlagCompletionFunc("namespace", o.completeNames(o.namespaceNames))
}

// fixedCompletions completes with the values starting with what is typed.
func fixedCompletions(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, toComplete) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFirstArg completes the first argument with names, and nothing
// after it.
func (o *Options) completeFirstArg(names func(context.Context) ([]string, error)) cobra.CompletionFunc {
	complete := o.completeNames(names)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}

// completeNames completes with the names starting with what is typed.
func (o *Options) completeNames(names func(context.Context) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := completionContext(cmd)
		defer cancel()
		all, err := names(ctx)
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range all {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeRevisions completes a revision flag with the recorded revisions
// of the pool given as the argument, each described by its initiator and
// outcome.
func (o *Options) completeRevisions(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := completionContext(cmd)
	defer cancel()
	c, pool, err := o.getPool(ctx, args[0])
	if err != nil {
		cobra.CompDebugln(err.Error(), true)
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	entries, err := revisions(ctx, c, pool)
	if err != nil {
		cobra.CompDebugln(err.Error(), true)
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for i := len(entries) - 1; i >= 0; i-- { // the newest first
		e := entries[i]
		n := fmt.Sprint(e.Revision)
		if strings.HasPrefix(n, toComplete) {
			out = append(out, cobra.CompletionWithDesc(n, strings.TrimSuffix(e.Initiator+", "+e.Outcome, ", ")))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

func completionContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, completionTimeout)
}

// poolNames are the NodePools of the namespace (-n, else the kubeconfig
// context's).
func (o *Options) poolNames(ctx context.Context) ([]string, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	list := &nodepoolv1.NodePoolList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out, nil
}

// fleetRolloutNames are the FleetRollouts (cluster-scoped).
func (o *Options) fleetRolloutNames(ctx context.Context) ([]string, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	list := &nodepoolv1.FleetRolloutList{}
	if err := c.List(ctx, list); err != nil {
		return nil, err
	}
	var out []string
	for _, f := range list.Items {
		out = append(out, f.Name)
	}
	sort.Strings(out)
	return out, nil
}

// namespaceNames are the namespaces, for -n.
func (o *Options) namespaceNames(ctx context.Context) ([]string, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list); err != nil {
		return nil, err
	}
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out, nil
}

// orderNames are the orders of fleet --sort-by.
func orderNames() []string {
	out := make([]string, 0, len(fleetOrders))
	for k := range fleetOrders {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
