package inputs_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	v3_5 "github.com/coreos/ignition/v2/config/v3_5"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// FuzzParseConfig feeds arbitrary ConfigMap content to the user config
// parser. Whatever it gets, it must not panic, must refuse with a
// document-level error, or return documents that the Ignition library
// accepts and that merge the same way in any order.
//
// Seeds: testdata/fuzz/FuzzParseConfig (run with plain go test).
// Longer: go test ./internal/inputs -run '^$' -fuzz '^FuzzParseConfig$' -fuzztime 5m
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(inputstest.ChronyConfig))
	f.Add([]byte(inputstest.TuningConfig))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := inputs.ParseConfig(data)
		if err != nil {
			var de *inputs.DocumentError
			if errors.As(err, &de) && de.Index < 1 {
				t.Fatalf("document index %d < 1: %v", de.Index, err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if len(docs) == 0 {
			t.Fatal("no error and no document")
		}
		for _, d := range docs {
			if d.Config.Ignition.Version != inputs.IgnitionVersion {
				t.Fatalf("document %d has version %q", d.Index, d.Config.Ignition.Version)
			}
			if !json.Valid(d.Canonical) {
				t.Fatalf("document %d canonical form is not JSON: %q", d.Index, d.Canonical)
			}
		}
		set, err := inputs.MergeUserConfigs("ns", []inputs.ConfigMapDocuments{{ConfigMap: "a", Documents: docs}})
		reversed := slices.Clone(docs)
		slices.Reverse(reversed)
		set2, err2 := inputs.MergeUserConfigs("ns", []inputs.ConfigMapDocuments{{ConfigMap: "a", Documents: reversed}})
		if (err == nil) != (err2 == nil) {
			t.Fatalf("merge depends on order: %v vs %v", err, err2)
		}
		if err != nil {
			return
		}
		a, _ := json.Marshal(set.Config)
		b, _ := json.Marshal(set2.Config)
		if string(a) != string(b) {
			t.Fatalf("merge depends on order:\n%s\n%s", a, b)
		}
		if _, rpt, err := v3_5.Parse(a); err != nil {
			t.Fatalf("merged config does not validate: %v\n%s\n%s", err, rpt, a)
		}
	})
}
