package scenario

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

var update = flag.Bool("update", false, "rewrite the golden files of the scenarios")

// t0 is a Monday noon.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// golden compares the world's trace with testdata/<name>.golden.
func golden(t *testing.T, w *World) {
	t.Helper()
	name := filepath.Join("testdata", strings.ReplaceAll(t.Name(), "/", "_")+".golden")
	got := w.Trace()
	if *update {
		if err := os.WriteFile(name, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/scenario -update)", err)
	}
	if string(want) != got {
		t.Errorf("trace differs from %s (run go test ./internal/scenario -update and review the diff):\n%s", name, got)
	}
}

func run(t *testing.T, w *World, d time.Duration) {
	t.Helper()
	if err := w.RunFor(d); err != nil {
		t.Fatalf("%v\n%s", err, w.Trace())
	}
}

func onPayloads(p *Pool) map[string]int {
	out := map[string]int{}
	for _, m := range p.Machines {
		out[m.Payload]++
	}
	return out
}

func latestHash(p *Pool) string { pl, _ := p.Latest(); return pl.Hash }

func settleNew(t *testing.T, w *World, s PoolSpec) *Pool {
	t.Helper()
	p := w.AddPool(s)
	run(t, w, 30*time.Minute)
	if got := onPayloads(p)[latestHash(p)]; got != int(s.Replicas) {
		t.Fatalf("new pool: %d machines on the latest payload, want %d\n%s", got, s.Replicas, w.Trace())
	}
	return p
}

func health(canary int32, canarySoak, soak time.Duration, policy nodepoolv1.FailurePolicy) *nodepoolv1.Health {
	return &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(canary)), CanarySoak: &metav1.Duration{Duration: canarySoak},
		Soak: &metav1.Duration{Duration: soak}, FailurePolicy: policy}
}

func TestScenarioANewPool(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	if len(p.History) != 1 || p.History[0].Initiator != rollout.InitiatorSpec || p.History[0].Outcome != OutcomeComplete {
		t.Errorf("history = %+v, want one complete spec record", p.History)
	}
	golden(t, w)
}

func TestScenarioAnOwnerChangeRollsEveryMachine(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, time.Hour)
	if got := onPayloads(p)[latestHash(p)]; got != 3 {
		t.Fatalf("%d machines on the new payload, want 3\n%s", got, w.Trace())
	}
	if r := p.History[len(p.History)-1]; r.Initiator != rollout.InitiatorSpec || r.Outcome != OutcomeComplete {
		t.Errorf("last record %+v, want a complete spec rollout", r)
	}
	golden(t, w)
}
