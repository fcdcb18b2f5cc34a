package sim

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/secret"
)

// WorkloadClusters gives a client of a Cluster's workload cluster, where
// the simulated Nodes live. Cluster API's clustercache.ClusterCache fits.
type WorkloadClusters interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
}

// kubeconfigClusters reaches workload clusters through their
// <cluster>-kubeconfig Secrets, as a real provider would, keeping one
// uncached client per cluster until its Secret changes.
type kubeconfigClusters struct {
	reader client.Reader
	scheme *runtime.Scheme

	mu      sync.Mutex
	clients map[client.ObjectKey]workloadClient
}

type workloadClient struct {
	resourceVersion string
	client          client.Client
}

// NewKubeconfigClusters returns WorkloadClusters that read each cluster's
// <cluster>-kubeconfig Secret with reader.
func NewKubeconfigClusters(reader client.Reader) WorkloadClusters {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme) // registering built-in types does not fail
	return &kubeconfigClusters{reader: reader, scheme: scheme, clients: map[client.ObjectKey]workloadClient{}}
}

func (k *kubeconfigClusters) GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: secret.Name(cluster.Name, secret.Kubeconfig)}
	if err := k.reader.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no Secret %s: the Cluster's control plane has not written its kubeconfig yet", key)
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, ok := k.clients[cluster]; ok && c.resourceVersion == s.ResourceVersion {
		return c.client, nil
	}
	data, ok := s.Data[secret.KubeconfigDataName]
	if !ok {
		return nil, fmt.Errorf("Secret %s has no key %q holding the kubeconfig", key, secret.KubeconfigDataName)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig in Secret %s does not load: %w", key, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "nodepool-sim"
	c, err := client.New(cfg, client.Options{Scheme: k.scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the workload cluster of %s: %w", cluster, err)
	}
	k.clients[cluster] = workloadClient{resourceVersion: s.ResourceVersion, client: c}
	return c, nil
}
