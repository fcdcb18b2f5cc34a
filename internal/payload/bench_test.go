package payload_test

import (
	"fmt"
	"strings"
	"testing"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
)

// BenchmarkRender renders the latest payload and its hashes (no Gather) of
// a pool with every input set and 10 user configs totalling 100 KiB: each
// ConfigMap holds 4 documents, each a 2.3 KiB file and a unit.
//
//	go test ./internal/payload -run '^$' -bench BenchmarkRender -benchmem
func BenchmarkRender(b *testing.B) {
	w := inputstest.New()
	w.UserConfigs, w.Pool.Spec.Config = nil, nil
	total := 0
	for i := range 10 {
		var docs []string
		for j := range 4 {
			body := strings.Repeat(fmt.Sprintf("setting-%d-%d=value\n", i, j), 104)
			docs = append(docs, fmt.Sprintf(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/bench/%d/%d.conf","mode":420,"contents":{"source":"data:,%s"}}]},"systemd":{"units":[{"name":"bench-%d-%d.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}`,
				i, j, strings.ReplaceAll(strings.ReplaceAll(body, "=", "%3D"), "\n", "%0A"), i, j))
		}
		config := strings.Join(docs, "\n---\n")
		total += len(config)
		name := fmt.Sprintf("bench-%d", i)
		w.UserConfigs = append(w.UserConfigs, inputstest.ConfigMap(name, config))
		w.Pool.Spec.Config = append(w.Pool.Spec.Config, nodepoolv1.LocalObjectReference{Name: name})
	}
	in := w.MustGather(b)
	for b.Loop() {
		if _, _, err := payload.Render(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total)/1024, "KiB-configs")
}
