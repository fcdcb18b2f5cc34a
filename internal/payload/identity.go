package payload

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	v3_5 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The node identity is what a payload says about itself: the kubelet
// drop-in that labels the node with its pool and payload, and the manifest
// file. It contains the payload hash, so it is rendered after the hash and
// is not a component (the hash cannot cover itself).
const (
	// KubeletUnit is the unit the labels drop-in extends.
	KubeletUnit = "kubelet.service"
	// KubeletLabelsDropin sets the node labels through KUBELET_EXTRA_ARGS,
	// the variable kubeadm's kubelet unit passes to the kubelet.
	KubeletLabelsDropin = "20-nodepool-labels.conf"
	// ManifestPath is the manifest of component digests on the node.
	ManifestPath = "/etc/nodepool/manifest.json"

	labelPool    = nodepoolv1.LabelPool
	labelPayload = nodepoolv1.LabelPayload
	labelsFlag   = "--node-labels="
)

// manifestFile is the JSON of ManifestPath.
type manifestFile struct {
	Pool       string   `json:"pool"`
	Payload    string   `json:"payload"`
	Components Manifest `json:"components"`
}

// NodeLabels are the labels a payload's kubelet sets on its node.
func NodeLabels(pool, payloadHash string) map[string]string {
	return map[string]string{labelPool: pool, labelPayload: Short(payloadHash)}
}

func renderIdentity(pool, hash string, m Manifest) (igntypes.Config, error) {
	mf, err := jsonFile(manifestFile{Pool: pool, Payload: hash, Components: m})
	if err != nil {
		return igntypes.Config{}, err
	}
	cfg := withFiles(file(ManifestPath, 0o644, mf))
	labels := fmt.Sprintf("%s=%s,%s=%s", labelPool, pool, labelPayload, Short(hash))
	contents := fmt.Sprintf("# Rendered by nodepool: the pool and payload of this node.\n[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=%s%s\"\n", labelsFlag, labels)
	cfg.Systemd.Units = []igntypes.Unit{dropin(KubeletUnit, KubeletLabelsDropin, contents)}
	return cfg, nil
}

// Booted is what a node learns from the payload it booted.
type Booted struct {
	// Pool is the pool the payload is for.
	Pool string
	// Hash is the full payload hash.
	Hash string
	// Manifest has the digest of each component.
	Manifest Manifest
	// NodeLabels are the labels the kubelet drop-in sets.
	NodeLabels map[string]string
}

// Inspect validates a payload as Ignition would and reads its node identity:
// what the simulated provider (or a node agent) needs to register a node.
func Inspect(ignition []byte) (*Booted, error) {
	cfg, rpt, err := v3_5.Parse(ignition)
	if err != nil {
		return nil, fmt.Errorf("not a valid Ignition %s config: %s", igntypes.MaxVersion, describe(rpt, err))
	}
	b := &Booted{}
	found := false
	for _, f := range cfg.Storage.Files {
		if f.Path != ManifestPath || f.Contents.Source == nil {
			continue
		}
		data, err := decodeDataURL(*f.Contents.Source)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ManifestPath, err)
		}
		var mf manifestFile
		if err := json.Unmarshal(data, &mf); err != nil {
			return nil, fmt.Errorf("%s is not a nodepool manifest: %w", ManifestPath, err)
		}
		b.Pool, b.Hash, b.Manifest = mf.Pool, mf.Payload, mf.Components
		found = true
	}
	if !found {
		return nil, fmt.Errorf("no %s: this is not a nodepool payload", ManifestPath)
	}
	for _, u := range cfg.Systemd.Units {
		if u.Name != KubeletUnit {
			continue
		}
		for _, d := range u.Dropins {
			if d.Name == KubeletLabelsDropin && d.Contents != nil {
				b.NodeLabels = parseNodeLabels(*d.Contents)
			}
		}
	}
	if b.NodeLabels == nil {
		return nil, fmt.Errorf("no %s drop-in %s: this is not a nodepool payload", KubeletUnit, KubeletLabelsDropin)
	}
	return b, nil
}

func parseNodeLabels(dropin string) map[string]string {
	i := strings.Index(dropin, labelsFlag)
	if i < 0 {
		return nil
	}
	rest := dropin[i+len(labelsFlag):]
	if j := strings.IndexAny(rest, "\" \n"); j >= 0 {
		rest = rest[:j]
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			labels[k] = v
		}
	}
	return labels
}

func decodeDataURL(s string) ([]byte, error) {
	const prefix = "data:;base64,"
	if !strings.HasPrefix(s, prefix) {
		return nil, fmt.Errorf("source is not a base64 data URL")
	}
	return base64.StdEncoding.DecodeString(s[len(prefix):])
}
