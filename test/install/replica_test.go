package install

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/test/harness"
)

// A replica is one pod of a shipped Deployment, run as a process of the
// nodepool binary: the container's args and env as they are, with these
// stand-ins for what a pod has and a test host lacks, and nothing else:
//
//   - Secret volumes: each volumeMount's mountPath is a temporary folder
//     filled from the volume's Secret (its items, key → path, or every key
//     without items), read from the API server; every arg naming a file
//     under the mountPath names the same file under the folder.
//   - Ports: each named containerPort is bound by a flag (portFlags); the
//     test checks that the arg (or the flag's default) binds that port, then
//     sets the flag to a free 127.0.0.1 port, since replicas share the
//     host's network.
//   - The ServiceAccount: the in-cluster token of serviceAccountName becomes
//     KUBECONFIG, a kubeconfig holding a TokenRequest token of that account
//     (the process's only credential, so only the shipped RBAC binds it).
//   - The Service the controller's --payload-server-url names: its DNS name
//     is dialled by the sim's machines as the test's forwarder (main_test.go).
type replica struct {
	name string
	// addrs holds the host address of each container port, by port name.
	addrs map[string]string

	cmd  *exec.Cmd
	log  *logBuffer
	done chan struct{}

	mu       sync.Mutex
	stopping bool
	exitErr  error
	// refusalsExpected: RBAC refusals in the log are the point of the test.
	refusalsExpected bool
}

// portFlags names the flag that binds each container port, by Deployment
// and port name.
var portFlags = map[string]map[string]string{
	controllerName: {"metrics": "metrics-bind-address", "probes": "health-probe-bind-address"},
	payloadName:    {"https": "bind-address", "probes": "probe-bind-address"},
}

// subcommands are the binary's commands the Deployments run, whose flag
// defaults the test reads.
var subcommands = map[string]func() *cobra.Command{
	"controller":     controller.NewCommand,
	"payload-server": payloadserver.NewCommand,
}

// running are the replicas started and not stopped yet, which checkReplicas
// looks at.
var running sync.Map // *replica → struct{}

// runOptions change how a replica starts; the zero value is as shipped.
type runOptions struct {
	// extraArgs are appended to the container's args.
	extraArgs []string
	// dropArgs removes the container's args starting with one of these
	// (an earlier layout's Deployment).
	dropArgs []string
	// noWait returns at once, without waiting for the readiness probe.
	noWait bool
}

// startReplica starts replica name of the shipped Deployment deploy and
// waits until its readiness probe passes; it is stopped (SIGTERM) when the
// test ends.
func startReplica(t *testing.T, deploy, name string, opts runOptions) *replica {
	t.Helper()
	d := deployment(t, deploy)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("deployment %s: the test runs one container, it has %d (and %d init containers)", deploy, len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if len(c.Command) != 0 {
		t.Fatalf("deployment %s: command %v overrides the image's entrypoint (nodepool), which the test runs", deploy, c.Command)
	}
	dir := filepath.Join(t.TempDir(), name)
	args := slices.DeleteFunc(append([]string(nil), c.Args...), func(a string) bool {
		return slices.ContainsFunc(opts.dropArgs, func(p string) bool { return strings.HasPrefix(a, p) })
	})

	// Secret volumes → folders.
	for _, m := range c.VolumeMounts {
		folder := filepath.Join(dir, "volumes", m.Name)
		writeSecretVolume(t, d.Namespace, pod.Volumes, m, folder)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, strings.TrimSuffix(m.MountPath, "/")+"/", folder+"/")
		}
	}

	// Container ports → free loopback ports.
	if len(args) == 0 || subcommands[args[0]] == nil {
		t.Fatalf("deployment %s: args %v do not start with a known subcommand", deploy, args)
	}
	flags := subcommands[args[0]]().Flags()
	addrs := map[string]string{}
	for _, p := range c.Ports {
		flag := portFlags[deploy][p.Name]
		if flag == "" || flags.Lookup(flag) == nil {
			t.Fatalf("deployment %s: container port %q has no known flag binding it; add it to portFlags", deploy, p.Name)
		}
		value, at := flagValue(args, flag)
		if at < 0 {
			value = flags.Lookup(flag).DefValue
		}
		if _, port, err := net.SplitHostPort(value); err != nil || port != strconv.Itoa(int(p.ContainerPort)) {
			t.Fatalf("deployment %s: container port %s is %d, but --%s binds %q", deploy, p.Name, p.ContainerPort, flag, value)
		}
		addrs[p.Name] = freeAddress(t)
		if at < 0 {
			args = append(args, "--"+flag+"="+addrs[p.Name])
		} else {
			args[at] = "--" + flag + "=" + addrs[p.Name]
		}
	}
	args = append(args, opts.extraArgs...)

	// Env, and the ServiceAccount as the only credential.
	environ := []string{"KUBECONFIG=" + writeTokenKubeconfig(t, d.Namespace, pod.ServiceAccountName, dir)}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			t.Fatalf("deployment %s: env %s uses valueFrom, which the test does not map", deploy, e.Name)
		}
		environ = append(environ, e.Name+"="+e.Value)
	}

	r := &replica{name: name, addrs: addrs, log: &logBuffer{prefix: name}, done: make(chan struct{})}
	r.cmd = exec.Command(binary, args...)
	r.cmd.Env = environ
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("started %s: nodepool %s", name, strings.Join(args, " "))
	running.Store(r, struct{}{})
	go func() {
		err := r.cmd.Wait()
		r.mu.Lock()
		r.exitErr = err
		r.mu.Unlock()
		close(r.done)
	}()
	t.Cleanup(func() {
		if err := r.problem(); err != nil {
			t.Error(err)
		}
		r.stop()
		if t.Failed() {
			t.Logf("log of %s (last lines):\n%s", name, r.log.tail(60))
		}
	})
	if !opts.noWait {
		r.waitReady(t, c.ReadinessProbe)
	}
	return r
}

// writeSecretVolume fills folder with what mount m shows of its Secret volume.
func writeSecretVolume(t *testing.T, namespace string, volumes []corev1.Volume, m corev1.VolumeMount, folder string) {
	t.Helper()
	var vol *corev1.Volume
	for i := range volumes {
		if volumes[i].Name == m.Name {
			vol = &volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || m.SubPath != "" {
		t.Fatalf("volume mount %s: the test maps whole Secret volumes only", m.Name)
	}
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: vol.Secret.SecretName}, s); err != nil {
		t.Fatal(err)
	}
	items := vol.Secret.Items
	if len(items) == 0 {
		for k := range s.Data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		data, ok := s.Data[it.Key]
		if !ok {
			t.Fatalf("volume %s: Secret %s has no key %s", m.Name, s.Name, it.Key)
		}
		path := filepath.Join(folder, it.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// flagValue finds --name=value (or a bare --name) in args: the value and
// its index, or -1.
func flagValue(args []string, name string) (string, int) {
	for i, a := range args {
		if a == "--"+name {
			return "true", i
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, i
		}
	}
	return "", -1
}

func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// writeTokenKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount namespace/name with a TokenRequest token.
func writeTokenKubeconfig(t *testing.T, namespace, name, dir string) string {
	t.Helper()
	token := serviceAccountToken(t, namespace, name)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = "test"
	path := filepath.Join(dir, "kubeconfig")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func serviceAccountToken(t *testing.T, namespace, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// serviceAccountConfig reaches the API server as ServiceAccount
// namespace/name, as the processes do.
func serviceAccountConfig(t *testing.T, namespace, name string) *rest.Config {
	return &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData},
		BearerToken: serviceAccountToken(t, namespace, name)}
}

// waitReady polls the readiness probe's HTTP GET until it answers 200.
func (r *replica) waitReady(t *testing.T, probe *corev1.Probe) {
	t.Helper()
	if probe == nil || probe.HTTPGet == nil {
		t.Fatalf("%s: the container has no HTTP readiness probe", r.name)
	}
	addr := r.addrs[probe.HTTPGet.Port.String()]
	if addr == "" {
		t.Fatalf("%s: the readiness probe's port %s is no named container port", r.name, probe.HTTPGet.Port.String())
	}
	url := "http://" + addr + probe.HTTPGet.Path
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := r.problem(); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %s did not answer 200; log:\n%s", r.name, url, r.log.tail(40))
}

// forbidden is how the API server's RBAC refusals read in a log (quotes
// around the user are escaped in JSON logs, so the match stops before).
const forbidden = "is forbidden: User "

// problem reports an exit the test did not ask for, or an RBAC refusal in
// the log.
func (r *replica) problem() error {
	select {
	case <-r.done:
		r.mu.Lock()
		stopping, err := r.stopping, r.exitErr
		r.mu.Unlock()
		if !stopping {
			return fmt.Errorf("%s exited (%v); log:\n%s", r.name, err, r.log.tail(40))
		}
	default:
	}
	r.mu.Lock()
	expected := r.refusalsExpected
	r.mu.Unlock()
	if line := r.log.find(forbidden); line != "" && !expected {
		return fmt.Errorf("%s was refused by RBAC: %s", r.name, line)
	}
	return nil
}

// exited reports whether the process has ended, and how.
func (r *replica) exited() (bool, error) {
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return true, r.exitErr
	default:
		return false, nil
	}
}

// expectRefusals accepts RBAC refusals in the log from now on.
func (r *replica) expectRefusals() {
	r.mu.Lock()
	r.refusalsExpected = true
	r.mu.Unlock()
}

// markStopped accepts that the process ended.
func (r *replica) markStopped() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
}

// kill ends the process at once (SIGKILL), as a node failure does.
func (r *replica) kill() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
	running.Delete(r)
}

// stop asks the process to end (SIGTERM), as the kubelet does, and kills it
// after the pod's grace period.
func (r *replica) stop() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "%s did not stop within 30s of SIGTERM; killing it. Last lines:\n%s\n", r.name, r.log.tail(15))
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	}
	running.Delete(r)
}

// checkReplicas fails the test if a running replica exited or was refused
// by RBAC.
func checkReplicas(t testing.TB) {
	t.Helper()
	running.Range(func(k, _ any) bool {
		if err := k.(*replica).problem(); err != nil {
			t.Fatal(err)
		}
		return true
	})
}

// logBuffer keeps a process's output, and copies it to stderr when
// NODEPOOL_TEST_LOG is set.
type logBuffer struct {
	prefix string
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv(harness.LogEnv) != "" {
		for _, l := range strings.SplitAfter(string(p), "\n") {
			if l != "" {
				fmt.Fprintf(os.Stderr, "[%s] %s", b.prefix, l)
			}
		}
	}
	return b.buf.Write(p)
}

// find returns the first line holding s, or "".
func (b *logBuffer) find(s string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

func (b *logBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
