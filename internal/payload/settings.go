package payload

import (
	"encoding/json"
	"fmt"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"nodepool.dev/nodepool/internal/inputs"
)

// SettingsOf reads back from a payload's fragments the controller settings
// it was rendered with: the payload server URL and CA (component
// payload-server) and the renderer version (component renderer). The
// management config location is not in a payload and is left zero. It is
// the inverse of renderPayloadServer and renderRenderer, so a client other
// than the controller (`kubectl nodepool plan` and `diff`) can render what
// the controller renders.
func SettingsOf(p *Payload) (inputs.Settings, error) {
	var s inputs.Settings
	var server struct {
		URL string `json:"url"`
		CA  string `json:"ca"`
	}
	if err := fragmentJSONFile(p, inputs.PayloadServer, PayloadServerPath, &server); err != nil {
		return s, err
	}
	var renderer struct {
		Version string `json:"version"`
	}
	if err := fragmentJSONFile(p, inputs.Renderer, RendererPath, &renderer); err != nil {
		return s, err
	}
	s.PayloadServerURL, s.PayloadServerCA, s.RendererVersion = server.URL, []byte(server.CA), renderer.Version
	return s, nil
}

// fragmentJSONFile decodes the JSON file at path of component c's fragment.
func fragmentJSONFile(p *Payload, c inputs.Component, path string, v any) error {
	raw, ok := p.Fragments[c]
	if !ok {
		return fmt.Errorf("payload %s has no fragment for component %s", Short(p.Hash), c)
	}
	var cfg igntypes.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("payload %s: the fragment of component %s is not an Ignition config: %w", Short(p.Hash), c, err)
	}
	for _, f := range cfg.Storage.Files {
		if f.Path != path || f.Contents.Source == nil {
			continue
		}
		data, err := decodeDataURL(*f.Contents.Source)
		if err != nil {
			return fmt.Errorf("payload %s, component %s, %s: %w", Short(p.Hash), c, path, err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("payload %s, component %s, %s: %w", Short(p.Hash), c, path, err)
		}
		return nil
	}
	return fmt.Errorf("payload %s: the fragment of component %s has no file %s", Short(p.Hash), c, path)
}
