package inputs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
)

const (
	machineConfigAPIVersion = "machineconfiguration.openshift.io/v1"
	machineConfigKind       = "MachineConfig"
)

// parseMachineConfig reads a MachineConfig document: spec.config (an
// Ignition config) and spec.kernelArguments. Everything else of spec is
// refused: nodepool would otherwise drop what the owner asked for.
func parseMachineConfig(top map[string]json.RawMessage) (igntypes.Config, []byte, error) {
	var apiVersion, kind string
	if err := unmarshalField(top, "apiVersion", &apiVersion); err != nil {
		return igntypes.Config{}, nil, err
	}
	if err := unmarshalField(top, "kind", &kind); err != nil {
		return igntypes.Config{}, nil, err
	}
	if apiVersion != machineConfigAPIVersion || kind != machineConfigKind {
		return igntypes.Config{}, nil, fmt.Errorf("unknown kind %q of apiVersion %q: a document is an Ignition config or a %s %s", kind, apiVersion, machineConfigAPIVersion, machineConfigKind)
	}
	for k := range top {
		switch k {
		case "apiVersion", "kind", "metadata", "spec":
		default:
			return igntypes.Config{}, nil, fmt.Errorf("MachineConfig field %q is not supported: only apiVersion, kind, metadata and spec are read", k)
		}
	}
	var spec map[string]json.RawMessage
	if raw, ok := top["spec"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &spec); err != nil {
			return igntypes.Config{}, nil, errors.New("MachineConfig spec is not an object")
		}
	}
	var extensions, kargs []string
	for k := range spec {
		switch k {
		case "config":
		case "kernelArguments":
			if err := unmarshalField(spec, k, &kargs); err != nil {
				return igntypes.Config{}, nil, fmt.Errorf("MachineConfig spec.%w", err)
			}
		case "extensions":
			if err := unmarshalField(spec, k, &extensions); err != nil {
				return igntypes.Config{}, nil, fmt.Errorf("MachineConfig spec.%w", err)
			}
		default:
			return igntypes.Config{}, nil, fmt.Errorf("MachineConfig spec.%s is not supported by nodepool: only spec.config and spec.kernelArguments are; put OS changes in spec.release.image", k)
		}
	}
	if len(extensions) > 0 {
		return igntypes.Config{}, nil, fmt.Errorf("MachineConfig spec.extensions %v is not supported: nodepool nodes do not layer OS extensions; build them into the OS image of spec.release.image and remove spec.extensions", extensions)
	}

	cfg := igntypes.Config{Ignition: igntypes.Ignition{Version: IgnitionVersion}}
	rawConfig, hasConfig := spec["config"]
	if hasConfig && !isNull(rawConfig) && !bytes.Equal(bytes.TrimSpace(rawConfig), []byte("{}")) {
		var err error
		if cfg, err = parseIgnition(rawConfig, "MachineConfig spec.config: "); err != nil {
			return igntypes.Config{}, nil, err
		}
	}
	for i, k := range kargs {
		if strings.TrimSpace(k) == "" || strings.ContainsAny(k, "\n\r") {
			return igntypes.Config{}, nil, fmt.Errorf("MachineConfig spec.kernelArguments[%d] %q is empty or spans lines: write one argument such as nosmt", i, k)
		}
		arg := igntypes.KernelArgument(k)
		if slices.Contains(cfg.KernelArguments.ShouldNotExist, arg) {
			return igntypes.Config{}, nil, fmt.Errorf("MachineConfig spec.kernelArguments[%d] %q is also in spec.config.kernelArguments.shouldNotExist: keep one", i, k)
		}
		if !slices.Contains(cfg.KernelArguments.ShouldExist, arg) {
			cfg.KernelArguments.ShouldExist = append(cfg.KernelArguments.ShouldExist, arg)
		}
	}
	if err := validateConfig(cfg); err != nil {
		return igntypes.Config{}, nil, fmt.Errorf("MachineConfig is not a valid Ignition config: %s", err)
	}

	// Canonical form: what the owner asked for, without metadata (a label
	// on the MachineConfig must not roll nodes).
	canonical := map[string]any{"apiVersion": apiVersion, "kind": kind}
	if len(spec) > 0 {
		s := map[string]json.RawMessage{}
		for k, v := range spec {
			c, err := canonicalJSON(v)
			if err != nil {
				return igntypes.Config{}, nil, err
			}
			s[k] = c
		}
		canonical["spec"] = s
	}
	b, err := json.Marshal(canonical)
	if err != nil {
		return igntypes.Config{}, nil, fmt.Errorf("cannot encode the MachineConfig: %w", err)
	}
	return cfg, b, nil
}

func unmarshalField(m map[string]json.RawMessage, key string, into any) error {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s has the wrong type: %w", key, err)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
