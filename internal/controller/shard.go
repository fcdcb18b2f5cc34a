package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/inputs"
)

// Shard is the part of the fleet one controller owns: the pools of a set
// of namespaces. Shards with disjoint namespaces run side by side on one
// API server, each with its own leader election, and never act on the
// same pool. The zero Shard owns every namespace.
type Shard struct {
	// Name names the shard: its leader election Lease and its field
	// manager (nodepool-controller-<name>). Empty for the unsharded
	// controller.
	Name string
	// Namespaces are the namespaces whose pools the shard owns; empty
	// means all.
	Namespaces []string
	// FleetRollouts makes a shard run every FleetRollout (one shard of a
	// fleet, --fleet-rollouts): it triggers the pools of every shard and
	// each pool's own shard carries its trigger out. The unsharded
	// controller always runs them.
	FleetRollouts bool
}

// RunsFleetRollouts reports whether the controller runs the FleetRollout
// controller.
func (s Shard) RunsFleetRollouts() bool {
	return s.Name == "" || s.FleetRollouts
}

// Owns reports whether the shard acts on the pools of namespace ns.
func (s Shard) Owns(ns string) bool {
	return len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, ns)
}

// FieldManager is the name the shard's writes carry (managedFields, the
// user agent): nodepool-controller, or nodepool-controller-<name>.
func (s Shard) FieldManager() string {
	if s.Name == "" {
		return "nodepool-controller"
	}
	return "nodepool-controller-" + s.Name
}

// LeaderElectionID is the shard's leader election Lease name.
func (s Shard) LeaderElectionID() string {
	return s.FieldManager() + ".nodepool.dev"
}

// Validate checks the shard's name and namespaces.
func (s Shard) Validate() error {
	if s.Name != "" && (strings.ContainsAny(s.Name, "/. ") || len(s.Name) > 40) {
		return fmt.Errorf("shard name %q must be a short DNS label", s.Name)
	}
	if s.Name == "" && len(s.Namespaces) > 0 {
		return fmt.Errorf("a controller owning some namespaces (%s) needs a shard name (--shard), for its own leader election", strings.Join(s.Namespaces, ","))
	}
	return nil
}

// CacheOptions scopes opts to the shard: its namespaces, the management
// config's (for that ConfigMap; pools there are not the shard's unless it
// owns the namespace) and the extra ones (the mirror namespace).
func (s Shard) CacheOptions(opts ctrlcache.Options, mgmt types.NamespacedName, extra ...string) ctrlcache.Options {
	if len(s.Namespaces) == 0 {
		return opts
	}
	if mgmt.Name == "" {
		mgmt = inputs.DefaultManagementConfig
	}
	opts.DefaultNamespaces = map[string]ctrlcache.Config{mgmt.Namespace: {}}
	for _, ns := range append(slices.Clone(s.Namespaces), extra...) {
		if ns != "" {
			opts.DefaultNamespaces[ns] = ctrlcache.Config{}
		}
	}
	return opts
}

// SelectNamespaces lists the namespaces matching a label selector, for a
// shard given by --namespace-selector. It is read once, at start: a
// namespace labelled later joins the shard at the controller's restart.
func SelectNamespaces(ctx context.Context, c client.Reader, selector string) ([]string, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("--namespace-selector %q: %w", selector, err)
	}
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the namespaces of --namespace-selector %q: %w", selector, err)
	}
	var out []string
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no namespace matches --namespace-selector %q: label the shard's namespaces first", selector)
	}
	return out, nil
}
