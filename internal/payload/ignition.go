package payload

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"nodepool.dev/nodepool/internal/inputs"
)

// Helpers that build Ignition values. Every file nodepool writes overwrites
// what the OS image had there: the payload is the truth for these paths.

func emptyConfig() igntypes.Config {
	return igntypes.Config{Ignition: igntypes.Ignition{Version: inputs.IgnitionVersion}}
}

func file(path string, mode int, contents []byte) igntypes.File {
	src := "data:;base64," + base64.StdEncoding.EncodeToString(contents)
	return igntypes.File{
		Node: igntypes.Node{Path: path, Overwrite: ptr(true)},
		FileEmbedded1: igntypes.FileEmbedded1{
			Mode:     ptr(mode),
			Contents: igntypes.Resource{Source: &src},
		},
	}
}

func withFiles(files ...igntypes.File) igntypes.Config {
	cfg := emptyConfig()
	cfg.Storage.Files = files
	return cfg
}

func dropin(unit, name, contents string) igntypes.Unit {
	return igntypes.Unit{Name: unit, Dropins: []igntypes.Dropin{{Name: name, Contents: ptr(contents)}}}
}

// jsonFile renders v as indented JSON with a final newline.
func jsonFile(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding JSON file: %w", err)
	}
	return append(b, '\n'), nil
}

// encode is the canonical form of a fragment or payload: Go's JSON encoding
// of the Ignition types, deterministic for a given value.
func encode(cfg igntypes.Config) ([]byte, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding Ignition config: %w", err)
	}
	return b, nil
}

func ptr[T any](v T) *T { return &v }
