package inputs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

func TestParseConfigReadsIgnitionAndMachineConfigs(t *testing.T) {
	tests := []struct {
		name   string
		config string
		check  func(t *testing.T, docs []inputs.Document)
	}{{
		name: "YAML Ignition 3.4 with an octal mode becomes 3.5",
		config: `ignition: {version: 3.4.0}
storage:
  files: [{path: /etc/a, mode: 0644, contents: {source: "data:,a"}}]
`,
		check: func(t *testing.T, docs []inputs.Document) {
			want(t, len(docs) == 1 && docs[0].Kind == inputs.KindIgnition, "one Ignition document, got %+v", docs)
			c := docs[0].Config
			want(t, c.Ignition.Version == "3.5.0", "version %q", c.Ignition.Version)
			want(t, *c.Storage.Files[0].Mode == 0o644, "mode %o", *c.Storage.Files[0].Mode)
		},
	}, {
		name:   "JSON Ignition 3.0 is translated",
		config: `{"ignition":{"version":"3.0.0"},"systemd":{"units":[{"name":"a.service","enabled":true}]}}`,
		check: func(t *testing.T, docs []inputs.Document) {
			want(t, docs[0].Config.Systemd.Units[0].Name == "a.service", "units %+v", docs[0].Config.Systemd.Units)
		},
	}, {
		name: "documents are numbered as written, empty ones skipped",
		config: `---
# only a comment
---
ignition: {version: 3.5.0}
---

---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
spec: {kernelArguments: [nosmt]}
`,
		check: func(t *testing.T, docs []inputs.Document) {
			want(t, len(docs) == 2, "got %d documents", len(docs))
			want(t, docs[0].Index == 2 && docs[1].Index == 4, "indices %d, %d", docs[0].Index, docs[1].Index)
			want(t, docs[1].Kind == inputs.KindMachineConfig, "kind %s", docs[1].Kind)
		},
	}, {
		name: "MachineConfig kernel arguments go to kernelArguments.shouldExist",
		config: `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: x, labels: {a: b}}
spec:
  kernelArguments: [nosmt, "hugepages=16", nosmt]
  extensions: []
  config:
    ignition: {version: 3.3.0}
    kernelArguments: {shouldExist: [quiet]}
`,
		check: func(t *testing.T, docs []inputs.Document) {
			got := docs[0].Config.KernelArguments.ShouldExist
			wantArgs := []igntypes.KernelArgument{"quiet", "nosmt", "hugepages=16"}
			want(t, len(got) == len(wantArgs), "kargs %v", got)
			for i := range wantArgs {
				want(t, got[i] == wantArgs[i], "kargs %v, want %v", got, wantArgs)
			}
			want(t, !strings.Contains(string(docs[0].Canonical), "metadata"), "canonical form keeps metadata: %s", docs[0].Canonical)
		},
	}, {
		name:   "CRLF line endings",
		config: "ignition: {version: 3.5.0}\r\n---\r\nignition: {version: 3.5.0}\r\n",
		check: func(t *testing.T, docs []inputs.Document) {
			want(t, len(docs) == 2, "got %d documents", len(docs))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := inputs.ParseConfig([]byte(tt.config))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			tt.check(t, docs)
		})
	}
}

// TestCanonicalFormIgnoresFormatting: comments, spacing, key order and YAML
// vs JSON never change a document's canonical form (the rollout hash input).
func TestCanonicalFormIgnoresFormatting(t *testing.T) {
	a := "# a comment\nignition: {version: 3.5.0}\nstorage: {files: [{path: /etc/a, contents: {source: 'data:,a'}}]}\n"
	b := `{"storage":{"files":[{"contents":{"source":"data:,a"},"path":"/etc/a"}]},   "ignition":{"version":"3.5.0"}}`
	da, err := inputs.ParseConfig([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	db, err := inputs.ParseConfig([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	if string(da[0].Canonical) != string(db[0].Canonical) {
		t.Errorf("canonical forms differ:\n%s\n%s", da[0].Canonical, db[0].Canonical)
	}
}

// TestBadUserConfigsAreRefused: each bad input is refused at Gather with
// reason InvalidConfig, and the message names the object, the document and
// the problem.
func TestBadUserConfigsAreRefused(t *testing.T) {
	const ign = "ignition: {version: 3.5.0}\n"
	file := func(path, data string) string {
		return ign + "storage: {files: [{path: " + path + ", contents: {source: 'data:," + data + "'}}]}\n"
	}
	mc := func(spec string) string {
		return "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec: " + spec + "\n"
	}
	tests := []struct {
		name    string
		configs []string // ConfigMaps bad, bad2, ... in spec.config
		mutate  func(w *inputstest.World)
		object  string // the object the error names
		doc     string // "document N", if any
		problem string
	}{
		{name: "bad YAML", configs: []string{"ignition: {version: 3.5.0\n"}, doc: "document 1", problem: "not valid YAML or JSON"},
		{name: "duplicate YAML key", configs: []string{ign + "ignition: {version: 3.4.0}\n"}, doc: "document 1", problem: "not valid YAML or JSON"},
		{name: "not an object", configs: []string{"- a\n- b\n"}, doc: "document 1", problem: "is not an object"},
		{name: "neither Ignition nor MachineConfig", configs: []string{"storage: {}\n"}, doc: "document 1", problem: "neither an Ignition config"},
		{name: "unknown kind", configs: []string{"apiVersion: v1\nkind: ConfigMap\n"}, doc: "document 1", problem: `unknown kind "ConfigMap"`},
		{name: "unknown MachineConfig version", configs: []string{"apiVersion: machineconfiguration.openshift.io/v2\nkind: MachineConfig\n"}, doc: "document 1", problem: "unknown kind"},
		{name: "Ignition spec 2", configs: []string{"ignition: {version: 2.2.0}\n"}, doc: "document 1", problem: "unsupported Ignition version 2.2.0"},
		{name: "experimental Ignition spec", configs: []string{"ignition: {version: 3.6.0-experimental}\n"}, doc: "document 1", problem: "unsupported Ignition version 3.6.0-experimental"},
		{name: "missing Ignition version", configs: []string{"ignition: {}\n"}, doc: "document 1", problem: "ignition.version is missing"},
		{name: "Ignition version not a version", configs: []string{"ignition: {version: three}\n"}, doc: "document 1", problem: `"three" is not a version`},
		{name: "bad proxy URL in a document", configs: []string{ign + "---\nignition: {version: 3.5.0, proxy: {httpProxy: 'ftp://proxy.corp:21'}}\n"}, doc: "document 2", problem: "proxies must be http(s)"},
		{name: "unknown Ignition field", configs: []string{ign + "storage: {filez: []}\n"}, doc: "document 1", problem: "unknown fields $.storage.filez"},
		{name: "relative file path", configs: []string{file("etc/a", "a")}, doc: "document 1", problem: "path not absolute"},
		{name: "invalid data URL", configs: []string{ign + "storage: {files: [{path: /etc/a, contents: {source: 'data:;base64,%%%'}}]}\n"}, doc: "document 1", problem: "storage.files.0.contents.source"},
		{name: "remote source without verification", configs: []string{ign + "storage: {files: [{path: /etc/a, contents: {source: 'https://example.com/a'}}]}\n"}, doc: "document 1", problem: "without verification.hash"},
		{name: "ignition.config.merge", configs: []string{"ignition: {version: 3.5.0, config: {merge: [{source: 'data:,x'}]}}\n"}, doc: "document 1", problem: "ignition.config.merge"},
		{name: "MachineConfig extensions", configs: []string{mc("{extensions: [usbguard]}")}, doc: "document 1", problem: "spec.extensions [usbguard] is not supported"},
		{name: "MachineConfig unknown spec field", configs: []string{mc("{osImageURL: quay.io/os:1}")}, doc: "document 1", problem: "spec.osImageURL is not supported"},
		{name: "MachineConfig status", configs: []string{mc("{}") + "status: {}\n"}, doc: "document 1", problem: `field "status" is not supported`},
		{name: "MachineConfig with Ignition spec 2", configs: []string{mc("{config: {ignition: {version: 2.2.0}}}")}, doc: "document 1", problem: "MachineConfig spec.config: unsupported Ignition version 2.2.0"},
		{name: "MachineConfig empty kernel argument", configs: []string{mc("{kernelArguments: ['']}")}, doc: "document 1", problem: "spec.kernelArguments[0]"},
		{name: "MachineConfig kernel argument required and forbidden", configs: []string{mc("{kernelArguments: [nosmt], config: {ignition: {version: 3.5.0}, kernelArguments: {shouldNotExist: [nosmt]}}}")}, doc: "document 1", problem: "also in spec.config.kernelArguments.shouldNotExist"},
		{name: "MachineConfig kernelArguments not a list", configs: []string{mc("{kernelArguments: nosmt}")}, doc: "document 1", problem: "kernelArguments has the wrong type"},
		{name: "no document", configs: []string{"# nothing yet\n"}, problem: "holds no document"},
		{name: "conflicting files in one ConfigMap", configs: []string{file("/etc/a", "one") + "---\n" + file("/etc/a", "two")}, problem: "documents 1 and 2 both declare path /etc/a, differently"},
		{name: "conflicting files across ConfigMaps", configs: []string{file("/etc/a", "one"), file("/etc/a", "two")}, object: "ConfigMap team-a/bad2", doc: "document 1", problem: "document 1 of ConfigMap bad both declare path /etc/a"},
		{name: "file where another document has a directory", configs: []string{file("/etc/a", "one"), ign + "storage: {directories: [{path: /etc/a}]}\n"}, problem: "both declare path /etc/a"},
		{name: "kernel argument required and forbidden", configs: []string{mc("{kernelArguments: [nosmt]}"), ign + "kernelArguments: {shouldNotExist: [nosmt]}\n"}, problem: "both declare kernel argument nosmt"},
		{name: "unit enabled and disabled", configs: []string{ign + "systemd: {units: [{name: a.service, enabled: true}]}\n", ign + "systemd: {units: [{name: a.service, enabled: false}]}\n"}, problem: "both declare unit a.service enabled"},
		{name: "valid alone, invalid together", configs: []string{ign + "storage: {links: [{path: /etc/l, target: /tmp}]}\n", file("/etc/l/a", "a")}, object: "ConfigMap team-a/bad", problem: "valid one by one but not together"},
		{name: "no config key", configs: []string{""}, mutate: func(w *inputstest.World) {
			w.UserConfigs[0].Data = map[string]string{"other": ign}
		}, problem: `has no key "config"`},
		{name: "bad spec.proxy URL", mutate: func(w *inputstest.World) { w.Pool.Spec.Proxy.HTTPProxy = "proxy.corp:3128" },
			object: "NodePool team-a/workers", problem: `spec.proxy.httpProxy: "proxy.corp:3128" must start with http:// or https://`},
		{name: "bad spec.proxy.noProxy entry", mutate: func(w *inputstest.World) { w.Pool.Spec.Proxy.NoProxy = []string{"a b"} },
			object: "NodePool team-a/workers", problem: "spec.proxy.noProxy[0]"},
		{name: "bad registry mirror", mutate: func(w *inputstest.World) { w.Pool.Spec.RegistryMirrors[0].Mirrors = []string{"https://mirror.corp"} },
			object: "NodePool team-a/workers", problem: "spec.registryMirrors[0].mirrors[0]"},
		{name: "bad release image", mutate: func(w *inputstest.World) { w.Pool.Spec.Release.Image = "Registry/OS:latest" },
			object: "NodePool team-a/workers", problem: "spec.release.image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := inputstest.New()
			if len(tt.configs) > 0 {
				w.UserConfigs = nil
				w.Pool.Spec.Config = nil
				for i, c := range tt.configs {
					name := "bad"
					if i > 0 {
						name += string(rune('1' + i))
					}
					w.UserConfigs = append(w.UserConfigs, inputstest.ConfigMap(name, c))
					w.Pool.Spec.Config = append(w.Pool.Spec.Config, nodepoolv1.LocalObjectReference{Name: name})
				}
			}
			if tt.mutate != nil {
				tt.mutate(w)
			}
			_, err := w.Gather(context.Background())
			if err == nil {
				t.Fatal("Gather accepted a bad input")
			}
			if r := inputs.Reason(err); r != nodepoolv1.ReasonInvalidConfig {
				t.Errorf("reason %q, want %s; error: %v", r, nodepoolv1.ReasonInvalidConfig, err)
			}
			object := tt.object
			if object == "" {
				object = "ConfigMap team-a/bad"
			}
			for _, s := range []string{object, tt.doc, tt.problem} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q:\n%v", s, err)
				}
			}
		})
	}
}

// TestUserConfigsAreOrderIndependent: the same set of documents gives the
// same merged config and the same rollout hash input, whatever the order of
// ConfigMaps in spec.config and of documents in a ConfigMap.
func TestUserConfigsAreOrderIndependent(t *testing.T) {
	docA := "ignition: {version: 3.5.0}\nstorage: {files: [{path: /etc/a, contents: {source: 'data:,a'}}]}\n"
	docB := `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/b","contents":{"source":"data:,b"}}]}}`
	docC := "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec: {kernelArguments: [nosmt]}\n"
	docD := "ignition: {version: 3.5.0}\nsystemd: {units: [{name: d.service, enabled: true}]}\n"
	layouts := [][]inputs.ConfigMapDocuments{
		{cm(t, "x", docA, docB), cm(t, "y", docC, docD)},
		{cm(t, "y", docD, docC), cm(t, "x", docB, docA)},
		{cm(t, "x", docD, docA), cm(t, "y", docB, docC)},
		{cm(t, "z", docC, docB, docA, docD)},
	}
	var first []byte
	var firstDocs [][]byte
	for i, l := range layouts {
		set, err := inputs.MergeUserConfigs("ns", l)
		if err != nil {
			t.Fatalf("layout %d: %v", i, err)
		}
		got, _ := json.Marshal(set.Config)
		if i == 0 {
			first, firstDocs = got, set.Documents
			continue
		}
		if string(got) != string(first) {
			t.Errorf("layout %d merged differently:\n%s\n%s", i, got, first)
		}
		if len(set.Documents) != len(firstDocs) {
			t.Fatalf("layout %d: %d documents, want %d", i, len(set.Documents), len(firstDocs))
		}
		for j := range firstDocs {
			if string(set.Documents[j]) != string(firstDocs[j]) {
				t.Errorf("layout %d: document %d differs", i, j)
			}
		}
	}
}

// TestRepeatedDeclarationsMergeOnce: the same file (with an append) or the
// same document in two places is a duplicate, not a conflict, and is
// written once.
func TestRepeatedDeclarationsMergeOnce(t *testing.T) {
	doc := "ignition: {version: 3.5.0}\nstorage: {files: [{path: /etc/a, append: [{source: 'data:,x'}]}]}\n"
	other := doc + "systemd: {units: [{name: o.service, enabled: true}]}\n"
	set, err := inputs.MergeUserConfigs("ns", []inputs.ConfigMapDocuments{cm(t, "x", doc), cm(t, "y", doc, other)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(set.Config.Storage.Files); n != 1 {
		t.Fatalf("%d files, want 1", n)
	}
	if n := len(set.Config.Storage.Files[0].Append); n != 1 {
		t.Errorf("the append is written %d times, want once", n)
	}
	if n := len(set.Documents); n != 2 {
		t.Errorf("%d distinct documents, want 2", n)
	}
	if o, ok := set.Origin("path /etc/a"); !ok || (o.ConfigMap != "x" && o.ConfigMap != "y") {
		t.Errorf("origin of /etc/a: %v %v", o, ok)
	}
}

func TestParseConfigRefusesHugeInput(t *testing.T) {
	_, err := inputs.ParseConfig(make([]byte, inputs.MaxConfigBytes+1))
	if err == nil || !strings.Contains(err.Error(), "split it across ConfigMaps") {
		t.Errorf("got %v", err)
	}
}

func cm(t *testing.T, name string, docs ...string) inputs.ConfigMapDocuments {
	t.Helper()
	parsed, err := inputs.ParseConfig([]byte(strings.Join(docs, "\n---\n")))
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", name, err)
	}
	return inputs.ConfigMapDocuments{ConfigMap: name, Documents: parsed}
}

func want(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}
