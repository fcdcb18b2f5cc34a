package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestCommandFlags(t *testing.T) {
	cmd := NewCommand()
	if cmd.Use != "sim-provider" {
		t.Fatalf("Use = %q", cmd.Use)
	}
	for _, f := range []string{"kubeconfig", "workload-kubeconfig", "namespace", "boot-delay", "update-delay", "fetch-timeout", "initial-retry-delay",
		"max-retry-delay", "concurrency", "metrics-bind-address", "health-probe-bind-address", "leader-elect", "zap-log-level"} {
		if cmd.Flags().Lookup(f) == nil {
			t.Errorf("no flag --%s", f)
		}
	}
	if err := cmd.Flags().Parse([]string{"--boot-delay=3s"}); err != nil {
		t.Fatal(err)
	}
	if d, _ := cmd.Flags().GetDuration("boot-delay"); d != 3*time.Second {
		t.Fatalf("--boot-delay = %s", d)
	}
	var out bytes.Buffer
	cmd = NewCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil || !strings.Contains(out.String(), "sim.nodepool.dev/fail-boot") || !strings.Contains(out.String(), "sim.nodepool.dev/fail-update") {
		t.Fatalf("--help: %v\n%s", err, out.String())
	}
	cmd = NewCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"extra"})
	if err := cmd.Execute(); err == nil {
		t.Fatal("a positional argument must be refused")
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{InitialRetryDelay: time.Second, MaxRetryDelay: 2 * time.Second}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Options{
		{BootDelay: -time.Second, InitialRetryDelay: 1, MaxRetryDelay: 1},
		{UpdateDelay: -time.Second, InitialRetryDelay: 1, MaxRetryDelay: 1},
		{InitialRetryDelay: 2 * time.Second, MaxRetryDelay: time.Second},
		{Concurrency: -1},
	} {
		if bad.validate() == nil {
			t.Errorf("%+v must be refused", bad)
		}
	}
}
