package inputs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	v3_5 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/types"
)

// ConfigMapDocuments are the parsed documents of one user config ConfigMap.
type ConfigMapDocuments struct {
	ConfigMap string
	Documents []Document
}

// Origin is where a user config claim came from.
type Origin struct {
	ConfigMap string
	Index     int
}

func (o Origin) String() string {
	return fmt.Sprintf("document %d of ConfigMap %s", o.Index, o.ConfigMap)
}

// UserConfigSet is the owner's configs merged into one Ignition config.
// The same set of documents gives the same UserConfigSet, whatever the
// order of the ConfigMaps in spec.config and of the documents in them.
type UserConfigSet struct {
	// Config is the merged Ignition config; zero when there are no documents.
	Config igntypes.Config
	// Documents are the canonical documents, sorted and deduplicated: the
	// rollout hash input of component UserConfigs.
	Documents [][]byte
	// origins maps each claim (see Claims) to the first document making it.
	origins map[string]Origin
}

// Origin says which document made a claim, for error messages.
func (u UserConfigSet) Origin(claim string) (Origin, bool) {
	o, ok := u.origins[claim]
	return o, ok
}

// IsEmpty reports whether the pool has no user config.
func (u UserConfigSet) IsEmpty() bool { return len(u.Documents) == 0 }

// MergeUserConfigs merges the documents of a pool's user config ConfigMaps
// (in namespace) with the Ignition library. Documents are sorted by their
// content first, so the result does not depend on their order. Two
// documents that declare the same thing differently (a file path with
// different content, a unit enabled and disabled, a kernel argument both
// required and forbidden) are refused with a *ConfigError naming both.
func MergeUserConfigs(namespace string, sets []ConfigMapDocuments) (UserConfigSet, error) {
	type entry struct {
		origin Origin
		doc    Document
		key    []byte
	}
	var all []entry
	for _, s := range sets {
		for _, d := range s.Documents {
			key, err := json.Marshal(d.Config)
			if err != nil {
				return UserConfigSet{}, invalid("ConfigMap", types.NamespacedName{Namespace: namespace, Name: s.ConfigMap},
					&DocumentError{Index: d.Index, Err: fmt.Errorf("cannot encode: %w", err)})
			}
			all = append(all, entry{origin: Origin{ConfigMap: s.ConfigMap, Index: d.Index}, doc: d, key: key})
		}
	}
	if len(all) == 0 {
		return UserConfigSet{}, nil
	}
	sort.SliceStable(all, func(i, j int) bool {
		if c := bytes.Compare(all[i].key, all[j].key); c != 0 {
			return c < 0
		}
		if c := bytes.Compare(all[i].doc.Canonical, all[j].doc.Canonical); c != 0 {
			return c < 0
		}
		return cmp.Or(strings.Compare(all[i].origin.ConfigMap, all[j].origin.ConfigMap), all[i].origin.Index-all[j].origin.Index) < 0
	})

	out := UserConfigSet{
		Config:  igntypes.Config{Ignition: igntypes.Ignition{Version: IgnitionVersion}},
		origins: map[string]Origin{},
	}
	values := map[string]string{}
	for _, e := range all {
		dups := map[string]bool{}
		claims := Claims(e.doc.Config)
		for _, k := range sortedKeys(claims) {
			v := claims[k]
			prev, seen := values[k]
			switch {
			case !seen:
				values[k] = v
				out.origins[k] = e.origin
			case prev == v:
				dups[k] = true
			default:
				first := out.origins[k]
				which := fmt.Sprintf("document %d and %s", e.origin.Index, first)
				if first.ConfigMap == e.origin.ConfigMap {
					which = fmt.Sprintf("documents %d and %d", min(first.Index, e.origin.Index), max(first.Index, e.origin.Index))
				}
				return UserConfigSet{}, invalid("ConfigMap", types.NamespacedName{Namespace: namespace, Name: e.origin.ConfigMap},
					fmt.Errorf("%s both declare %s, differently: keep one of them, or make them identical", which, k))
			}
		}
		out.Config = v3_5.Merge(out.Config, WithoutClaims(e.doc.Config, dups))
		out.Documents = append(out.Documents, e.doc.Canonical)
	}
	if err := validateConfig(out.Config); err != nil {
		names := make([]string, 0, len(sets))
		for _, s := range sets {
			names = append(names, s.ConfigMap)
		}
		slices.Sort(names)
		return UserConfigSet{}, invalid("ConfigMap", types.NamespacedName{Namespace: namespace, Name: names[0]},
			fmt.Errorf("the documents of ConfigMaps %s are valid one by one but not together: %s", strings.Join(names, ", "), err))
	}
	slices.SortFunc(out.Documents, bytes.Compare)
	out.Documents = slices.CompactFunc(out.Documents, bytes.Equal)
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
