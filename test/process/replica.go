package process

import (
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
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/payloadserver"
)

// A Replica is one pod of a Deployment, run as a process of the nodepool
// binary: the container's args and env as they are, with these stand-ins
// for what a pod has and a test host lacks, and nothing else:
//
//   - Secret volumes: each volumeMount's mountPath is a folder filled from
//     the volume's Secret (its items, key → path, or every key without
//     items), read from the API server; every arg naming a file under the
//     mountPath names the same file under the folder.
//   - Ports: each named containerPort is bound by a flag (PortFlags); Start
//     checks that the arg (or the flag's default) binds that port, then sets
//     the flag to a free 127.0.0.1 port, since replicas share the host's
//     network.
//   - The ServiceAccount: the in-cluster token of serviceAccountName becomes
//     KUBECONFIG, a kubeconfig holding a TokenRequest token of that account
//     (the process's only credential, so only the shipped RBAC binds it).
//
// The Service the controller's --payload-server-url names is the suite's to
// stand in for (test/stack's Forwarder).
type Replica struct {
	// Name names the replica in errors and its log's lines.
	Name string
	// Addrs holds the host address of each container port, by port name.
	Addrs map[string]string
	// Args are the args the process runs with.
	Args []string
	// Log holds the process's output.
	Log *LogBuffer

	cmd  *exec.Cmd
	done chan struct{}

	mu       sync.Mutex
	stopping bool
	exitErr  error
	// refusalsExpected: RBAC refusals in the log are the point of the test.
	refusalsExpected bool
}

// PortFlags names the flag that binds each container port, by the
// subcommand the container runs and the port's name.
var PortFlags = map[string]map[string]string{
	"controller":     {"metrics": "metrics-bind-address", "probes": "health-probe-bind-address"},
	"payload-server": {"https": "bind-address", "probes": "probe-bind-address"},
}

// subcommands are the binary's commands the Deployments run, whose flag
// defaults Start reads.
var subcommands = map[string]func() *cobra.Command{
	"controller":     controller.NewCommand,
	"payload-server": payloadserver.NewCommand,
}

// Options say how Start runs a replica; Binary, Config and Dir are needed.
type Options struct {
	// Binary is the nodepool binary.
	Binary string
	// Config reaches the API server as an administrator: it reads the
	// Secrets the volumes show and requests the ServiceAccount's token, and
	// its host and CA are what the replica's kubeconfig names.
	Config *rest.Config
	// Name names the replica; the Deployment's name if empty.
	Name string
	// Dir is a folder for the replica's volumes and kubeconfig.
	Dir string
	// ExtraArgs are appended to the container's args.
	ExtraArgs []string
	// DropArgs removes the container's args starting with one of these
	// (an earlier layout's Deployment).
	DropArgs []string
}

// Start starts one replica of Deployment d, without waiting for its
// readiness (WaitReady).
func Start(ctx context.Context, d *appsv1.Deployment, o Options) (*Replica, error) {
	name := o.Name
	if name == "" {
		name = d.Name
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		return nil, fmt.Errorf("deployment %s: the test runs one container, it has %d (and %d init containers)", d.Name, len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if len(c.Command) != 0 {
		return nil, fmt.Errorf("deployment %s: command %v overrides the image's entrypoint (nodepool), which the test runs", d.Name, c.Command)
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	args := slices.DeleteFunc(append([]string(nil), c.Args...), func(a string) bool {
		return slices.ContainsFunc(o.DropArgs, func(p string) bool { return strings.HasPrefix(a, p) })
	})

	// Secret volumes → folders.
	for _, m := range c.VolumeMounts {
		folder := filepath.Join(o.Dir, "volumes", m.Name)
		if err := writeSecretVolume(ctx, cs, d.Namespace, pod.Volumes, m, folder); err != nil {
			return nil, err
		}
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, strings.TrimSuffix(m.MountPath, "/")+"/", folder+"/")
		}
	}

	// Container ports → free loopback ports.
	if len(args) == 0 || subcommands[args[0]] == nil {
		return nil, fmt.Errorf("deployment %s: args %v do not start with a known subcommand", d.Name, args)
	}
	flags := subcommands[args[0]]().Flags()
	addrs := map[string]string{}
	for _, p := range c.Ports {
		flag := PortFlags[args[0]][p.Name]
		if flag == "" || flags.Lookup(flag) == nil {
			return nil, fmt.Errorf("deployment %s: container port %q has no known flag binding it; add it to PortFlags", d.Name, p.Name)
		}
		value, at := FlagValue(args, flag)
		if at < 0 {
			value = flags.Lookup(flag).DefValue
		}
		if _, port, err := net.SplitHostPort(value); err != nil || port != strconv.Itoa(int(p.ContainerPort)) {
			return nil, fmt.Errorf("deployment %s: container port %s is %d, but --%s binds %q", d.Name, p.Name, p.ContainerPort, flag, value)
		}
		if addrs[p.Name], err = FreeAddress(); err != nil {
			return nil, err
		}
		if at < 0 {
			args = append(args, "--"+flag+"="+addrs[p.Name])
		} else {
			args[at] = "--" + flag + "=" + addrs[p.Name]
		}
	}
	args = append(args, o.ExtraArgs...)

	// Env, and the ServiceAccount as the only credential.
	kubeconfig, err := WriteTokenKubeconfig(ctx, o.Config, d.Namespace, pod.ServiceAccountName, o.Dir)
	if err != nil {
		return nil, err
	}
	environ := []string{"KUBECONFIG=" + kubeconfig}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("deployment %s: env %s uses valueFrom, which the test does not map", d.Name, e.Name)
		}
		environ = append(environ, e.Name+"="+e.Value)
	}

	r := &Replica{Name: name, Addrs: addrs, Args: args, Log: &LogBuffer{Prefix: name}, done: make(chan struct{})}
	r.cmd = exec.Command(o.Binary, args...)
	r.cmd.Env = environ
	r.cmd.Stdout, r.cmd.Stderr = r.Log, r.Log
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
	return r, nil
}

// writeSecretVolume fills folder with what mount m shows of its Secret volume.
func writeSecretVolume(ctx context.Context, cs kubernetes.Interface, namespace string, volumes []corev1.Volume, m corev1.VolumeMount, folder string) error {
	var vol *corev1.Volume
	for i := range volumes {
		if volumes[i].Name == m.Name {
			vol = &volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || m.SubPath != "" {
		return fmt.Errorf("volume mount %s: the test maps whole Secret volumes only", m.Name)
	}
	s, err := cs.CoreV1().Secrets(namespace).Get(ctx, vol.Secret.SecretName, metav1.GetOptions{})
	if err != nil {
		return err
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
			return fmt.Errorf("volume %s: Secret %s has no key %s", m.Name, s.Name, it.Key)
		}
		path := filepath.Join(folder, it.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// FlagValue finds --name=value (or a bare --name) in args: the value and
// its index, or -1.
func FlagValue(args []string, name string) (string, int) {
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

// FreeAddress returns a 127.0.0.1 address no one listens on now.
func FreeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

// WaitReady polls the readiness probe's HTTP GET until it answers 200,
// for at most timeout; an exit or an RBAC refusal meanwhile ends the wait.
func (r *Replica) WaitReady(probe *corev1.Probe, timeout time.Duration) error {
	if probe == nil || probe.HTTPGet == nil {
		return fmt.Errorf("%s: the container has no HTTP readiness probe", r.Name)
	}
	addr := r.Addrs[probe.HTTPGet.Port.String()]
	if addr == "" {
		return fmt.Errorf("%s: the readiness probe's port %s is no named container port", r.Name, probe.HTTPGet.Port.String())
	}
	url := "http://" + addr + probe.HTTPGet.Path
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := r.Problem(); err != nil {
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
	return fmt.Errorf("%s: %s did not answer 200; log:\n%s", r.Name, url, r.Log.Tail(40))
}

// Forbidden is how the API server's RBAC refusals read in a log (quotes
// around the user are escaped in JSON logs, so the match stops before).
const Forbidden = "is forbidden: User "

// Problem reports an exit the test did not ask for, or an RBAC refusal in
// the log (unless ExpectRefusals was called).
func (r *Replica) Problem() error {
	select {
	case <-r.done:
		r.mu.Lock()
		stopping, err := r.stopping, r.exitErr
		r.mu.Unlock()
		if !stopping {
			return fmt.Errorf("%s exited (%v); log:\n%s", r.Name, err, r.Log.Tail(40))
		}
	default:
	}
	r.mu.Lock()
	expected := r.refusalsExpected
	r.mu.Unlock()
	if line := r.Log.Find(Forbidden); line != "" && !expected {
		return fmt.Errorf("%s was refused by RBAC: %s", r.Name, line)
	}
	return nil
}

// Exited reports whether the process has ended, and how.
func (r *Replica) Exited() (bool, error) {
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return true, r.exitErr
	default:
		return false, nil
	}
}

// ExpectRefusals accepts RBAC refusals in the log from now on.
func (r *Replica) ExpectRefusals() {
	r.mu.Lock()
	r.refusalsExpected = true
	r.mu.Unlock()
}

// MarkStopped accepts that the process ended.
func (r *Replica) MarkStopped() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
}

// Kill ends the process at once (SIGKILL), as a node failure does.
func (r *Replica) Kill() {
	r.MarkStopped()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// Stop asks the process to end (SIGTERM), as the kubelet does, and kills it
// after the pod's grace period.
func (r *Replica) Stop() {
	r.MarkStopped()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "%s did not stop within 30s of SIGTERM; killing it. Last lines:\n%s\n", r.Name, r.Log.Tail(15))
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	}
}
