package clusterctl

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/test/harness"
)

// A replica is one pod of a Deployment as clusterctl applied it, run as a
// process of the nodepool binary with the container's args and env, and
// these stand-ins for what a pod has (as in test/install): each Secret
// volume is a folder filled from its Secret, each named container port a
// free loopback port set through the flag that binds it, and the
// in-cluster credential a kubeconfig with a TokenRequest token of the pod's
// ServiceAccount (so only the shipped RBAC binds it).
type replica struct {
	name  string
	addrs map[string]string // container port name → host address
	cmd   *exec.Cmd
	log   *logBuffer
	done  chan struct{}

	mu       sync.Mutex
	stopping bool
	exitErr  error
}

// portFlags names the flag binding each container port, by Deployment.
var portFlags = map[string]map[string]string{
	controllerName: {"metrics": "metrics-bind-address", "probes": "health-probe-bind-address"},
	payloadName:    {"https": "bind-address", "probes": "probe-bind-address"},
}

// startReplica runs one replica of Deployment d and waits for its
// readiness probe.
func startReplica(ctx context.Context, d *appsv1.Deployment, dir string) (*replica, error) {
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.Containers[0].Command) != 0 {
		return nil, fmt.Errorf("deployment %s: the test runs one container with the image's entrypoint", d.Name)
	}
	c := pod.Containers[0]
	dir = filepath.Join(dir, d.Name)
	args := append([]string(nil), c.Args...)
	for _, m := range c.VolumeMounts {
		folder := filepath.Join(dir, "volumes", m.Name)
		if err := writeSecretVolume(ctx, d.Namespace, pod.Volumes, m, folder); err != nil {
			return nil, err
		}
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, strings.TrimSuffix(m.MountPath, "/")+"/", folder+"/")
		}
	}
	addrs := map[string]string{}
	for _, p := range c.Ports {
		flag := portFlags[d.Name][p.Name]
		if flag == "" {
			return nil, fmt.Errorf("deployment %s: container port %s has no known flag", d.Name, p.Name)
		}
		addr, err := freeAddress()
		if err != nil {
			return nil, err
		}
		addrs[p.Name] = addr
		set := false
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
				if _, port, _ := net.SplitHostPort(v); port != strconv.Itoa(int(p.ContainerPort)) {
					return nil, fmt.Errorf("deployment %s: container port %s is %d, --%s binds %s", d.Name, p.Name, p.ContainerPort, flag, v)
				}
				args[i], set = "--"+flag+"="+addr, true
			}
		}
		if !set {
			args = append(args, "--"+flag+"="+addr)
		}
	}
	kubeconfig, err := writeTokenKubeconfig(ctx, d.Namespace, pod.ServiceAccountName, dir)
	if err != nil {
		return nil, err
	}
	environ := []string{"KUBECONFIG=" + kubeconfig}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("deployment %s: env %s uses valueFrom", d.Name, e.Name)
		}
		environ = append(environ, e.Name+"="+e.Value)
	}
	r := &replica{name: d.Name, addrs: addrs, log: &logBuffer{prefix: d.Name}, done: make(chan struct{})}
	r.cmd = exec.Command(binary, args...)
	r.cmd.Env = environ
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		err := r.cmd.Wait()
		r.mu.Lock()
		r.exitErr = err
		r.mu.Unlock()
		close(r.done)
	}()
	return r, r.waitReady(c.ReadinessProbe)
}

func writeSecretVolume(ctx context.Context, ns string, volumes []corev1.Volume, m corev1.VolumeMount, folder string) error {
	var vol *corev1.Volume
	for i := range volumes {
		if volumes[i].Name == m.Name {
			vol = &volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || m.SubPath != "" {
		return fmt.Errorf("volume mount %s: the test maps whole Secret volumes only", m.Name)
	}
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: vol.Secret.SecretName}, s); err != nil {
		return err
	}
	if err := os.MkdirAll(folder, 0o700); err != nil {
		return err
	}
	items := vol.Secret.Items
	if len(items) == 0 {
		for k := range s.Data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		if err := os.WriteFile(filepath.Join(folder, it.Path), s.Data[it.Key], 0o600); err != nil {
			return err
		}
	}
	return nil
}

func freeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

// writeTokenKubeconfig writes a kubeconfig authenticating as ServiceAccount
// ns/name with a TokenRequest token.
func writeTokenKubeconfig(ctx context.Context, ns, name, dir string) (string, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of ServiceAccount %s/%s: %w", ns, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = "test"
	path := filepath.Join(dir, "kubeconfig")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return path, clientcmd.WriteToFile(*kc, path)
}

func (r *replica) waitReady(probe *corev1.Probe) error {
	if probe == nil || probe.HTTPGet == nil || r.addrs[probe.HTTPGet.Port.String()] == "" {
		return fmt.Errorf("%s: no HTTP readiness probe on a named port", r.name)
	}
	url := "http://" + r.addrs[probe.HTTPGet.Port.String()] + probe.HTTPGet.Path
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if err := r.problem(); err != nil {
			return err
		}
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s did not answer 200; log:\n%s", r.name, url, r.log.tail(40))
}

// problem reports an exit nobody asked for, or an RBAC refusal in the log.
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
	if line := r.log.find("is forbidden: User "); line != "" {
		return fmt.Errorf("%s was refused: %s", r.name, line)
	}
	return nil
}

// stop ends the process as the kubelet does: SIGTERM, then SIGKILL.
func (r *replica) stop() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	}
}

// logBuffer keeps a process's output, copied to stderr when
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
