package inputs

import (
	"encoding/json"
	"fmt"
)

// Intent returns the canonical form of a rollout component's input: what
// the rollout hashes are computed over. It is written from the inputs, not
// from the rendered payload, so a new nodepool that renders differently
// never changes a rollout hash. withVersion false leaves the release
// version out (for RolloutHashWithoutVersion).
//
// nil means "unset": an unset input contributes nothing to the hash, so
// adding a new optional rollout input later does not roll existing pools.
// Each form has its own fixed JSON field names, independent of the API
// types. Changing any of them changes the rollout hash of every pool:
// never do it without a migration.
func (in *Inputs) Intent(c Component, withVersion bool) ([]byte, error) {
	var v any
	switch c {
	case Release:
		r := struct {
			Version string `json:"version,omitempty"`
			Image   string `json:"image,omitempty"`
		}{Image: in.Release.Image}
		if withVersion {
			r.Version = in.Release.Version
		}
		if r.Version == "" && r.Image == "" {
			return nil, nil
		}
		v = r
	case UserConfigs:
		if in.UserConfigs.IsEmpty() {
			return nil, nil
		}
		docs := make([]json.RawMessage, len(in.UserConfigs.Documents))
		for i, d := range in.UserConfigs.Documents {
			docs[i] = d
		}
		v = struct {
			Documents []json.RawMessage `json:"documents"`
		}{docs}
	case PullSecretRef:
		if in.PullSecretRef == "" {
			return nil, nil
		}
		v = struct {
			Name string `json:"name"`
		}{in.PullSecretRef}
	case TrustBundleRef:
		if in.TrustBundleRef == "" {
			return nil, nil
		}
		v = struct {
			Name string `json:"name"`
		}{in.TrustBundleRef}
	case Proxy:
		if in.Proxy.IsZero() {
			return nil, nil
		}
		v = struct {
			HTTPProxy  string   `json:"httpProxy,omitempty"`
			HTTPSProxy string   `json:"httpsProxy,omitempty"`
			NoProxy    []string `json:"noProxy,omitempty"`
		}{in.Proxy.HTTPProxy, in.Proxy.HTTPSProxy, in.Proxy.NoProxy}
	case RegistryMirrors:
		if len(in.RegistryMirrors) == 0 {
			return nil, nil
		}
		type mirror struct {
			Source  string   `json:"source"`
			Mirrors []string `json:"mirrors"`
		}
		ms := make([]mirror, len(in.RegistryMirrors))
		for i, m := range in.RegistryMirrors {
			ms[i] = mirror{m.Source, m.Mirrors}
		}
		v = ms
	case APIServerEndpoint:
		v = struct {
			Host string `json:"host"`
			Port int32  `json:"port"`
		}{in.Cluster.Endpoint.Host, in.Cluster.Endpoint.Port}
	case InfrastructureTemplate:
		v = struct {
			APIGroup string          `json:"apiGroup"`
			Kind     string          `json:"kind"`
			Spec     json.RawMessage `json:"spec"`
		}{in.InfrastructureTemplate.APIGroup, in.InfrastructureTemplate.Kind, json.RawMessage(in.InfrastructureTemplate.Spec)}
	default:
		return nil, fmt.Errorf("component %q is not a rollout component: it has no owner intent", c)
	}
	return json.Marshal(v)
}
