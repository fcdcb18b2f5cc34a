package inputs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/coreos/go-semver/semver"
	v3_5 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/report"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ConfigKey is the key of a user config ConfigMap that holds its documents.
const ConfigKey = "config"

// MaxConfigBytes bounds one ConfigMap's config key (the API server's own
// limit for a ConfigMap is 1 MiB).
const MaxConfigBytes = 1 << 20

// IgnitionVersion is the Ignition spec every payload and fragment is written in.
const IgnitionVersion = "3.5.0"

// DocumentKind is what a user config document is.
type DocumentKind string

const (
	// KindIgnition is an Ignition config fragment, spec 3.0.0 to 3.5.0.
	KindIgnition DocumentKind = "Ignition"
	// KindMachineConfig is a machineconfiguration.openshift.io/v1 MachineConfig.
	KindMachineConfig DocumentKind = "MachineConfig"
)

// Document is one parsed document of a user config.
type Document struct {
	// Index counts the documents of the config key from 1.
	Index int
	Kind  DocumentKind
	// Config is the document as an Ignition 3.5 config; a MachineConfig's
	// kernel arguments are in KernelArguments.ShouldExist.
	Config igntypes.Config
	// Canonical is the document as written, as JSON with sorted keys (a
	// MachineConfig without its metadata). It is the rollout hash input, so
	// formatting, comments and key order never roll nodes, and an upgrade of
	// the Ignition library cannot change a hash.
	Canonical []byte
}

// ParseConfig parses the config key of a user config ConfigMap: one or more
// YAML or JSON documents separated by "---" lines, each an Ignition config
// (spec 3.x) or a MachineConfig. Errors are *DocumentError naming the document.
func ParseConfig(data []byte) ([]Document, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("is %d bytes, more than the %d allowed: split it across ConfigMaps", len(data), MaxConfigBytes)
	}
	r := kyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []Document
	index := 0
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		index++
		if err != nil {
			return nil, &DocumentError{Index: index, Err: fmt.Errorf("cannot split documents: %w; separate documents with a line of three dashes (---)", err)}
		}
		doc, ok, err := parseDocument(raw)
		if err != nil {
			return nil, &DocumentError{Index: index, Err: err}
		}
		if !ok {
			continue
		}
		doc.Index = index
		docs = append(docs, doc)
	}
	if len(docs) == 0 {
		return nil, errors.New("holds no document: write at least one Ignition config or MachineConfig, or remove the ConfigMap from spec.config")
	}
	return docs, nil
}

// parseDocument parses one document; ok is false for an empty one.
func parseDocument(raw []byte) (doc Document, ok bool, err error) {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return Document{}, false, fmt.Errorf("is not valid YAML or JSON: %w", err)
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return Document{}, false, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return Document{}, false, errors.New("is not an object: a document is a YAML mapping or JSON object, an Ignition config or a MachineConfig")
	}
	_, hasKind := top["kind"]
	_, hasAPIVersion := top["apiVersion"]
	_, hasIgnition := top["ignition"]
	switch {
	case hasKind || hasAPIVersion:
		cfg, canonical, err := parseMachineConfig(top)
		if err != nil {
			return Document{}, false, err
		}
		return Document{Kind: KindMachineConfig, Config: cfg, Canonical: canonical}, true, nil
	case hasIgnition:
		cfg, err := parseIgnition(js, "")
		if err != nil {
			return Document{}, false, err
		}
		canonical, err := canonicalJSON(js)
		if err != nil {
			return Document{}, false, err
		}
		return Document{Kind: KindIgnition, Config: cfg, Canonical: canonical}, true, nil
	default:
		return Document{}, false, errors.New("is neither an Ignition config (no ignition.version) nor a MachineConfig (no apiVersion and kind)")
	}
}

// parseIgnition parses an Ignition config of spec 3.0.0 to 3.5.0 into 3.5
// types and applies nodepool's rules. at prefixes field paths in errors.
func parseIgnition(js []byte, at string) (igntypes.Config, error) {
	var stub struct {
		Ignition struct {
			Version *string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(js, &stub); err != nil {
		return igntypes.Config{}, fmt.Errorf("%signition is not an object: %w", at, err)
	}
	if stub.Ignition.Version == nil {
		return igntypes.Config{}, fmt.Errorf("%signition.version is missing: set it to %s", at, IgnitionVersion)
	}
	v, err := semver.NewVersion(*stub.Ignition.Version)
	if err != nil {
		return igntypes.Config{}, fmt.Errorf("%signition.version %q is not a version: set it to %s", at, *stub.Ignition.Version, IgnitionVersion)
	}
	if v.String() != *stub.Ignition.Version {
		// "3.5.00" parses as 3.5.0 but would be stored as written.
		return igntypes.Config{}, fmt.Errorf("%signition.version %q is not a canonical version: write it as %s", at, *stub.Ignition.Version, v)
	}
	if v.Major != 3 || v.PreRelease != "" || igntypes.MaxVersion.LessThan(*v) {
		return igntypes.Config{}, fmt.Errorf("%sunsupported Ignition version %s: write spec 3.0.0 to %s (spec 2.x must be translated, experimental specs are refused)", at, v, IgnitionVersion)
	}
	cfg, rpt, err := v3_5.ParseCompatibleVersion(js)
	if err != nil {
		return igntypes.Config{}, fmt.Errorf("%sis not a valid Ignition %s config: %s", at, v, describeReport(rpt, err))
	}
	if unused := unusedKeys(rpt); len(unused) > 0 {
		return igntypes.Config{}, fmt.Errorf("%shas unknown fields %s: check their spelling against the Ignition %s spec", at, strings.Join(unused, ", "), v)
	}
	if err := checkSelfContained(cfg, at); err != nil {
		return igntypes.Config{}, err
	}
	return cfg, nil
}

// describeReport lists the fatal entries of an Ignition report.
func describeReport(rpt report.Report, err error) string {
	var msgs []string
	for _, e := range rpt.Entries {
		if !e.Kind.IsFatal() {
			continue
		}
		if e.Context.Len() > 0 {
			msgs = append(msgs, fmt.Sprintf("%s: %s", e.Context, e.Message))
		} else {
			msgs = append(msgs, e.Message)
		}
	}
	if len(msgs) == 0 {
		return err.Error()
	}
	return strings.Join(msgs, "; ")
}

// unusedKeys returns the keys Ignition ignored: a typo there would silently
// drop what the owner meant, so nodepool refuses them.
func unusedKeys(rpt report.Report) []string {
	var keys []string
	for _, e := range rpt.Entries {
		if !e.Kind.IsFatal() && strings.HasPrefix(e.Message, "unused key ") {
			keys = append(keys, e.Context.String())
		}
	}
	return keys
}

// checkSelfContained refuses what would make a payload depend on something
// outside it: a node would boot content that no hash covers.
func checkSelfContained(cfg igntypes.Config, at string) error {
	if len(cfg.Ignition.Config.Merge) > 0 || cfg.Ignition.Config.Replace.Source != nil {
		return fmt.Errorf("%signition.config.merge and ignition.config.replace are not allowed: a payload must be self-contained, so put that content in this document", at)
	}
	check := func(field string, r igntypes.Resource) error {
		if r.Source == nil || strings.HasPrefix(*r.Source, "data:") || r.Verification.Hash != nil {
			return nil
		}
		return fmt.Errorf("%s%s fetches %q at boot without verification.hash: a change there would reach nodes without a rollout; embed the content as a data: URL or set verification.hash", at, field, *r.Source)
	}
	for i, f := range cfg.Storage.Files {
		if err := check(fmt.Sprintf("storage.files[%d].contents.source", i), f.Contents); err != nil {
			return err
		}
		for j, a := range f.Append {
			if err := check(fmt.Sprintf("storage.files[%d].append[%d].source", i, j), a); err != nil {
				return err
			}
		}
	}
	for i, l := range cfg.Storage.Luks {
		if err := check(fmt.Sprintf("storage.luks[%d].keyFile.source", i), l.KeyFile); err != nil {
			return err
		}
	}
	for i, ca := range cfg.Ignition.Security.TLS.CertificateAuthorities {
		if err := check(fmt.Sprintf("ignition.security.tls.certificateAuthorities[%d].source", i), ca); err != nil {
			return err
		}
	}
	return nil
}

// validateConfig runs the Ignition library's validation on a config built
// in code (no raw JSON to correlate).
func validateConfig(cfg igntypes.Config) error {
	rpt := validate.ValidateWithContext(cfg, nil)
	if rpt.IsFatal() {
		return errors.New(describeReport(rpt, errors.New("invalid")))
	}
	return nil
}

// canonicalJSON re-encodes JSON with sorted keys and no insignificant
// space, keeping numbers exactly as written.
func canonicalJSON(js []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("cannot re-encode the document: %w", err)
	}
	return json.Marshal(v)
}
