package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/process"
	"nodepool.dev/nodepool/test/stack"
)

// The shipped objects the tests run, as config/default names them.
const (
	systemNamespace  = "nodepool-system"
	controllerName   = "nodepool-controller"
	payloadName      = "nodepool-payload-server"
	tlsSecretName    = "nodepool-payload-server-tls"
	leaderElectionID = "nodepool-controller.nodepool.dev"
)

var (
	env *harness.Env
	// binary is the nodepool binary, built once for the run.
	binary string
	// shipped is `kustomize build config/default`.
	shipped []*unstructured.Unstructured
	// service stands in for the payload server Service.
	service *stack.Forwarder
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	defer func() {
		if binary != "" {
			_ = os.RemoveAll(filepath.Dir(binary))
		}
	}()
	return process.RunSuite(m, "test/install", &env, setup, func() { service.Close() })
}

func setup() error {
	ctx := context.Background()
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if shipped, err = kustomizeBuild(filepath.Join(root, "config", "default")); err != nil {
		return err
	}
	// The binary builds, into a temporary folder, while the control plane
	// starts.
	dir, err := os.MkdirTemp("", "nodepool-install-")
	if err != nil {
		return err
	}
	binary = filepath.Join(dir, "nodepool")
	if err := process.BuildWhile(root, binary, func() (err error) {
		env, err = harness.Start(ctx, harness.Options{AddToScheme: []func(*runtime.Scheme) error{sim.AddToScheme}})
		return err
	}); err != nil {
		return err
	}
	for _, u := range shipped {
		if err := apply(ctx, u); err != nil {
			return err
		}
	}
	if err := createTLSSecret(ctx); err != nil {
		return err
	}
	if err := env.Client.Create(ctx, stack.ManagementConfig("registry.example/haproxy@sha256:"+string(bytes.Repeat([]byte("a"), 64)))); err != nil {
		return err
	}
	if service, err = stack.NewForwarder(); err != nil {
		return err
	}
	svcHost, err := serviceAddress()
	if err != nil {
		return err
	}
	// The sim's machines resolve the Service's DNS name to the forwarder;
	// any other address is dialled as it is.
	dial := service.DialAs(func() string { return svcHost })
	return stack.RunSim(env, sim.Options{InitialRetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second, DialPayloadServer: dial})
}

// kustomizeBuild returns the objects kustomize builds from dir.
func kustomizeBuild(dir string) ([]*unstructured.Unstructured, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	b, err := rm.AsYaml()
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// apply server-side applies one shipped object, as kubectl apply
// --server-side does (the CRD is already installed by the harness: this
// makes it the shipped one).
func apply(ctx context.Context, u *unstructured.Unstructured) error {
	err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("install-test"), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// createTLSSecret creates the Secret both Deployments mount: the payload
// server's serving certificate for its Service's DNS name, and the CA the
// controller copies into user-data.
func createTLSSecret(ctx context.Context) error {
	ca, err := testpki.NewCA("nodepool install test CA")
	if err != nil {
		return err
	}
	host, err := serviceAddress()
	if err != nil {
		return err
	}
	h, _, _ := net.SplitHostPort(host)
	certPEM, keyPEM, err := ca.Issue(h)
	if err != nil {
		return err
	}
	return env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: tlsSecretName},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": ca.PEM},
	})
}

// shippedObject returns the shipped object of kind and name, converted to out.
func shippedObject(kind, name string, out any) error {
	for _, u := range shipped {
		if u.GetKind() == kind && u.GetName() == name {
			return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
		}
	}
	return fmt.Errorf("config/default builds no %s %s", kind, name)
}

// serviceAddress is host:port of the payload server Service, as a pod
// reaches it: <name>.<namespace>.svc:<port>.
func serviceAddress() (string, error) {
	var svc corev1.Service
	if err := shippedObject("Service", payloadName, &svc); err != nil {
		return "", err
	}
	if len(svc.Spec.Ports) != 1 {
		return "", fmt.Errorf("service %s has %d ports, want 1", svc.Name, len(svc.Spec.Ports))
	}
	return net.JoinHostPort(svc.Name+"."+svc.Namespace+".svc", fmt.Sprint(svc.Spec.Ports[0].Port)), nil
}

// deployment returns the shipped Deployment name.
func deployment(t testing.TB, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := shippedObject("Deployment", name, d); err != nil {
		t.Fatal(err)
	}
	return d
}
