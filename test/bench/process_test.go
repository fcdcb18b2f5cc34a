package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// controllerProcess is `nodepool controller` in its own process, so that
// its memory and requests are its own.
type controllerProcess struct {
	cmd     *exec.Cmd
	metrics string
	// pprof is its /debug/pprof/ endpoint (NODEPOOL_BENCH_PPROF, or a free port).
	pprof string
	done  chan struct{}
}

// buildNodepool builds the nodepool binary into dir.
func buildNodepool(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "nodepool")
	out, err := exec.Command("go", "build", "-o", bin, "nodepool.dev/nodepool/cmd/nodepool").CombinedOutput()
	if err != nil {
		b.Fatalf("building nodepool: %v\n%s", err, out)
	}
	return bin
}

func writeKubeconfig(b *testing.B, cfg *rest.Config, dir string) string {
	b.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "admin"}
	kc.CurrentContext = "bench"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return path
}

func freePort(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// startController starts the controller binary with args and waits until
// its metrics endpoint answers.
func startController(b *testing.B, bin, kubeconfig, logFile string, args ...string) *controllerProcess {
	b.Helper()
	addr := freePort(b)
	pprof := os.Getenv("NODEPOOL_BENCH_PPROF")
	if i := slices.Index(args, "--pprof-bind-address"); i >= 0 && i+1 < len(args) {
		pprof = args[i+1] // the caller's (a second shard's)
	} else {
		if pprof == "" {
			pprof = freePort(b)
		}
		args = append(args, "--pprof-bind-address", pprof)
	}
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"controller", "--metrics-bind-address", addr, "--health-probe-bind-address", "0"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the benchmark
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &controllerProcess{cmd: cmd, metrics: "http://" + addr + "/metrics", pprof: "http://" + pprof + "/debug/pprof/", done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = log.Close(); close(p.done) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := p.scrape("process_cpu_seconds_total"); err == nil {
			return p
		}
		select {
		case <-p.done:
			b.Fatalf("the controller exited: see %s", logFile)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the controller's metrics never answered: see %s", logFile)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// collectGarbage has the controller run a garbage collection (its heap
// profile endpoint with gc=1): its heap in use is then what it holds, not
// what it has yet to collect.
func (p *controllerProcess) collectGarbage(b *testing.B) {
	b.Helper()
	resp, err := http.Get(p.pprof + "heap?gc=1")
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// ProfileEnv names a folder: when set, BenchmarkFleet saves the
// controller's CPU profile of each phase there (resync-N.pprof, bump-N.pprof, heap-N.pprof per fleet size N),
// read from its pprof endpoint (NODEPOOL_BENCH_PPROF, host:port).
const ProfileEnv = "NODEPOOL_BENCH_PROFILE"

// profile saves a CPU profile of the next seconds to ProfileEnv/name.pprof
// when both ProfileEnv and NODEPOOL_BENCH_PPROF are set; wait for it with
// the function it returns.
func profile(b *testing.B, name string, seconds int) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 { // the endpoint of a controller just started
			if savePprof(b, fmt.Sprintf("profile?seconds=%d", seconds), name) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { <-done }
}

// heapProfile saves the controller's heap profile now to
// ProfileEnv/name.pprof, when ProfileEnv and NODEPOOL_BENCH_PPROF are set.
func heapProfile(b *testing.B, name string) {
	if !savePprof(b, "heap?gc=1", name) && os.Getenv(ProfileEnv) != "" {
		b.Error("the controller's heap profile was not read")
	}
}

// savePprof saves the controller's /debug/pprof/<path> to
// ProfileEnv/name.pprof; true when it did, or when profiles are not asked
// for (ProfileEnv or NODEPOOL_BENCH_PPROF unset).
func savePprof(b *testing.B, path, name string) bool {
	dir, addr := os.Getenv(ProfileEnv), os.Getenv("NODEPOOL_BENCH_PPROF")
	if dir == "" || addr == "" {
		return true
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + path)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		b.Error(err)
		return true
	}
	defer func() { _ = f.Close() }()
	_, _ = io.Copy(f, resp.Body)
	return true
}

func (p *controllerProcess) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// scrape reads the controller's metrics of these names (all without
// names): the endpoint encodes only those, not every pool's series.
func (p *controllerProcess) scrape(names ...string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := p.metrics
	if len(names) > 0 {
		u += "?" + url.Values{"name[]": names}.Encode()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// sum adds the samples of a metric whose labels match (nil matches all);
// skip drops samples whose label has the value.
func (p *controllerProcess) sum(b *testing.B, name string, match func(map[string]string) bool) float64 {
	b.Helper()
	mfs, err := p.scrape(name)
	if err != nil {
		b.Fatal(err)
	}
	mf, ok := mfs[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if match != nil && !match(labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

func (p *controllerProcess) reconciles(b *testing.B) float64 {
	return p.sum(b, "controller_runtime_reconcile_total", func(l map[string]string) bool { return l["controller"] == "nodepool" })
}

// writes counts the controller's API requests that change something.
func (p *controllerProcess) writes(b *testing.B) float64 {
	return p.sum(b, "rest_client_requests_total", func(l map[string]string) bool {
		switch l["method"] {
		case "GET", "LIST", "WATCH", "HEAD", "OPTIONS":
			return false
		}
		return true
	})
}

func (p *controllerProcess) renders(b *testing.B, result string) float64 {
	return p.sum(b, "nodepool_render_cache_total", func(l map[string]string) bool { return l["result"] == result })
}

func (p *controllerProcess) heapInuse(b *testing.B) float64 {
	return p.sum(b, "go_memstats_heap_inuse_bytes", nil)
}

// rss is the process's resident memory, from /proc.
func (p *controllerProcess) rss(b *testing.B) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// attached: the control plane is an earlier run's (AttachEnv), not this
// process's children.
var attached bool

// childCPU is the CPU seconds (user and system) used so far by this test
// process's child processes named comm: the test control plane's
// kube-apiserver and etcd are its children.
func childCPU(comm string) float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	total := 0.0
	for _, d := range dirs {
		raw, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != comm {
			continue
		}
		// After the name: state ppid ... utime (14th field) stime (15th).
		f := strings.Fields(s[end+1:])
		if len(f) < 13 || (!attached && f[1] != strconv.Itoa(os.Getpid())) {
			continue
		}
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		total += (utime + stime) / 100 // USER_HZ
	}
	return total
}

// apiServerProfile saves a CPU profile of the kube-apiserver over the next
// seconds to ProfileEnv/name.pprof, when ProfileEnv is set: where the API
// server's time goes when it, not the controller, bounds a phase.
func apiServerProfile(b *testing.B, cfg *rest.Config, name string, seconds int) (wait func()) {
	dir := os.Getenv(ProfileEnv)
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			b.Error(err)
			return
		}
		hc.Timeout = time.Duration(seconds+60) * time.Second
		resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds))
		if err != nil {
			b.Errorf("the kube-apiserver's profile: %v", err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("the kube-apiserver's profile: %s", resp.Status)
			return
		}
		if f := profileFile(b, dir, name); f != nil {
			defer func() { _ = f.Close() }()
			_, _ = io.Copy(f, resp.Body)
		}
	}()
	return func() { <-done }
}

// profileFile creates dir/name.pprof; nil (the error reported) when it
// cannot.
func profileFile(b *testing.B, dir, name string) *os.File {
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		b.Error(err)
		return nil
	}
	return f
}

// selfCPU is this process's CPU seconds: the Cluster API controllers, the
// sim provider and the payload server, which run in it, and the
// benchmark's own watch.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// selfProfile saves a CPU profile of this process (Cluster API, the sim,
// the payload server) over the next seconds to ProfileEnv/name.pprof,
// when ProfileEnv is set: where Cluster API's share of a phase goes.
func selfProfile(b *testing.B, name string, seconds int) {
	dir := os.Getenv(ProfileEnv)
	if dir == "" {
		return
	}
	f := profileFile(b, dir, name)
	if f == nil {
		return
	}
	defer func() { _ = f.Close() }()
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Logf("no profile of this process: %v", err) // -test.cpuprofile holds it
		return
	}
	time.Sleep(time.Duration(seconds) * time.Second)
	pprof.StopCPUProfile()
}
