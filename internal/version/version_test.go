package version

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Version: "v0.3.0"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}},
	}
	got := fromBuildInfo(Info{}, bi)
	if got.Version != "v0.3.0" || got.Revision != "abc123-dirty" || got.GoVersion != "go1.99.1" {
		t.Errorf("from the build info: %+v", got)
	}
	// What the linker stamped wins.
	got = fromBuildInfo(Info{Version: "v1.0.0", Revision: "def456"}, bi)
	if got.Version != "v1.0.0" || got.Revision != "def456" {
		t.Errorf("the stamped values were overridden: %+v", got)
	}
	// A plain `go build` in a checkout records (devel).
	got = fromBuildInfo(Info{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	if got.Version != "" {
		t.Errorf("(devel) was taken as a version: %+v", got)
	}
}

func TestCommandAndCollector(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	i := Get()
	for _, want := range []string{"version:  " + i.Version, "revision: " + i.Revision, "go:       go1."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("`version` printed no %q:\n%s", want, out.String())
		}
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector())
	want := `
# HELP nodepool_build_info Always 1; its labels name the version, source revision and Go version of the running binary.
# TYPE nodepool_build_info gauge
nodepool_build_info{goversion="` + i.GoVersion + `",revision="` + i.Revision + `",version="` + i.Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nodepool_build_info"); err != nil {
		t.Error(err)
	}
}
