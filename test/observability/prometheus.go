package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// OperatorConfig is the Prometheus configuration the Prometheus Operator
// generates for a Prometheus object selecting the ServiceMonitors (YAML
// documents): scrape-config (SCRAPE_CONFIG, built from
// hack/tools/prometheus-operator) runs the operator's own generator, for
// the version of Prometheus PROMETHEUS is.
func OperatorConfig(t testing.TB, serviceMonitors []byte) []byte {
	t.Helper()
	cmd := exec.Command(Tool(t, "SCRAPE_CONFIG"), "-prometheus-version", PrometheusVersion(t))
	cmd.Stdin = bytes.NewReader(serviceMonitors)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scrape-config: %v\n%s", err, stderr.String())
	}
	return out
}

// prometheusModuleVersion is the Prometheus module's version in a binary's
// name (bin/prometheus-v0.316.0): module v0.X.Y is Prometheus 3.X.Y.
var prometheusModuleVersion = regexp.MustCompile(`-v0\.([1-9])(\d\d)\.(\d+)$`)

// PrometheusVersion is the release of Prometheus that PROMETHEUS is, from
// its name (the Makefile names it after the module version).
func PrometheusVersion(t testing.TB) string {
	t.Helper()
	bin := Tool(t, "PROMETHEUS")
	m := prometheusModuleVersion.FindStringSubmatch(bin)
	if m == nil {
		t.Fatalf("PROMETHEUS=%s is not named prometheus-v0.<major><minor>.<patch> (the Makefile's name)", bin)
	}
	minor, _ := strconv.Atoi(m[2])
	return fmt.Sprintf("v%s.%d.%s", m[1], minor, m[3])
}

// Endpoint is one address Kubernetes' endpoints discovery finds for a
// Service port, with the meta labels it gives the target.
type Endpoint struct {
	Address string
	Labels  map[string]string
}

// invalidLabelChars are what Prometheus replaces with _ in a Kubernetes
// label's name to make the meta label's (strutil.SanitizeLabelName).
var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// MetaLabels returns labels with, for each Kubernetes label (or
// annotation) k=v of an object, <prefix>_<k>=v and <prefix>present_<k>=true,
// k sanitised as Prometheus' Kubernetes discovery does.
func MetaLabels(labels map[string]string, prefix, presentPrefix string, of map[string]string) map[string]string {
	for k, v := range of {
		name := invalidLabelChars.ReplaceAllString(k, "_")
		labels[prefix+name] = v
		labels[presentPrefix+name] = "true"
	}
	return labels
}

// StaticDiscovery rewrites a generated configuration for a Prometheus
// outside the cluster: each job's kubernetes_sd_configs (role endpoints,
// in the namespaces it names) becomes static_configs holding the
// endpoints given for those namespaces, with the meta labels the
// discovery would give them, so the job's relabelings, unchanged, decide
// what is scraped and with which labels. The placeholders the operator's
// config reloader fills in ($(SHARD), $(POD_NAME)) are filled in as it
// does for the first pod of an unsharded Prometheus.
func StaticDiscovery(t testing.TB, config []byte, endpoints []Endpoint) []byte {
	t.Helper()
	config = bytes.ReplaceAll(config, []byte("$(SHARD)"), []byte("0"))
	config = bytes.ReplaceAll(config, []byte("$(POD_NAME)"), []byte("prometheus-k8s-0"))
	var cfg map[string]any
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		t.Fatalf("the generated configuration: %v", err)
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	if len(jobs) == 0 {
		t.Fatalf("the generated configuration has no scrape_configs:\n%s", config)
	}
	for _, j := range jobs {
		job := j.(map[string]any)
		sds, _ := job["kubernetes_sd_configs"].([]any)
		if len(sds) != 1 {
			t.Fatalf("job %v: %d kubernetes_sd_configs, want 1", job["job_name"], len(sds))
		}
		sd := sds[0].(map[string]any)
		if sd["role"] != "endpoints" {
			t.Fatalf("job %v: kubernetes_sd_configs role %v, want endpoints (the operator's default)", job["job_name"], sd["role"])
		}
		var names []any
		if ns, ok := sd["namespaces"].(map[string]any); ok {
			names, _ = ns["names"].([]any)
		}
		var groups []any
		for _, e := range endpoints {
			if len(names) > 0 && !slices.Contains(names, any(e.Labels["__meta_kubernetes_namespace"])) {
				continue
			}
			labels := map[string]any{}
			for k, v := range e.Labels {
				labels[k] = v
			}
			groups = append(groups, map[string]any{"targets": []any{e.Address}, "labels": labels})
		}
		delete(job, "kubernetes_sd_configs")
		job["static_configs"] = groups
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Prometheus is a real Prometheus server (PROMETHEUS, built from
// hack/tools/promtool) the test started.
type Prometheus struct {
	URL string
	log *bytes.Buffer
}

// StartPrometheus runs Prometheus with config until the test ends.
func StartPrometheus(t testing.TB, config []byte) *Prometheus {
	t.Helper()
	bin := Tool(t, "PROMETHEUS")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	p := &Prometheus{URL: "http://" + addr, log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("prometheus' log:\n%s", p.log.String())
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("prometheus exited: %v\n%s", err, p.log.String())
		default:
		}
		if resp, err := http.Get(p.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within a minute:\n%s", p.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// get reads an API endpoint's data.
func (p *Prometheus) get(path string, params url.Values, data any) error {
	resp, err := http.Get(p.URL + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s", r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// Query evaluates expr now and returns the labels of each series of its
// result (one, without labels, for a scalar).
func (p *Prometheus) Query(expr string) ([]map[string]string, error) {
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &d); err != nil {
		return nil, err
	}
	if d.ResultType != "vector" && d.ResultType != "matrix" {
		return []map[string]string{{}}, nil
	}
	var rs []struct {
		Metric map[string]string `json:"metric"`
	}
	if err := json.Unmarshal(d.Result, &rs); err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Metric)
	}
	return out, nil
}

// Target is an active target of Prometheus.
type Target struct {
	ScrapePool string            `json:"scrapePool"`
	Labels     map[string]string `json:"labels"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
	LastScrape time.Time         `json:"lastScrape"`
}

// Targets are Prometheus' active targets.
func (p *Prometheus) Targets() ([]Target, error) {
	var d struct {
		Active []Target `json:"activeTargets"`
	}
	err := p.get("/api/v1/targets", url.Values{"state": {"active"}}, &d)
	return d.Active, err
}
