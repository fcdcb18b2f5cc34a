package dist

import (
	kyaml "sigs.k8s.io/yaml"
)

// krewPlugin is a krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2).
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Caveats          string         `json:"caveats,omitempty"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string     `json:"uri"`
	SHA256 string     `json:"sha256"`
	Files  []krewFile `json:"files"`
	Bin    string     `json:"bin"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// krewArchive is one platform's plugin archive.
type krewArchive struct {
	Platform Platform
	URI      string
	SHA256   string
	// Files in the archive besides the binary (LICENSE).
	Extra []string
}

// krewManifest renders the plugin manifest for the archives.
func krewManifest(version, homepage string, archives []krewArchive) ([]byte, error) {
	p := krewPlugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"}
	p.Metadata.Name = "nodepool"
	p.Spec.Version = version
	p.Spec.Homepage = homepage
	p.Spec.ShortDescription = "Inspect and control the rollouts of NodePools"
	p.Spec.Description = `Inspects and controls the rollouts of nodepool's NodePools, pools of worker
machines on Cluster API whose nodes are replaced only when their owner asks:
rollout status, history, undo, restart, pause, resume and apply-pending; diff
and plan predict whether an edit replaces nodes, with the controller's own
engine; fleet lists the pools whose nodes do not run the platform's latest.
`
	p.Spec.Caveats = `kubectl (1.26 or later) completes the plugin's arguments (pool, FleetRollout
and revision names) with kubectl_complete-nodepool, installed beside the
plugin: link it onto your PATH, for example

  ln -s "$(dirname "$(readlink -f "$(command -v kubectl-nodepool)")")/kubectl_complete-nodepool" ~/.local/bin/
`
	for _, a := range archives {
		pl := krewPlatform{URI: a.URI, SHA256: a.SHA256, Bin: pluginBinary(a.Platform)}
		pl.Selector.MatchLabels = map[string]string{"os": a.Platform.OS, "arch": a.Platform.Arch}
		pl.Files = append(pl.Files, krewFile{From: pluginBinary(a.Platform), To: "."})
		for _, f := range a.Extra {
			pl.Files = append(pl.Files, krewFile{From: f, To: "."})
		}
		p.Spec.Platforms = append(p.Spec.Platforms, pl)
	}
	return kyaml.Marshal(p)
}

// pluginBinary is the plugin's file name on p: kubectl finds plugins by it.
func pluginBinary(p Platform) string {
	if p.OS == "windows" {
		return "kubectl-nodepool.exe"
	}
	return "kubectl-nodepool"
}

// pluginArchiveName is the release asset of the plugin for p.
func pluginArchiveName(p Platform) string {
	return "kubectl-nodepool_" + p.OS + "_" + p.Arch + ".tar.gz"
}
