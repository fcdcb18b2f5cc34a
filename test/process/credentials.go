package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// ServiceAccountToken requests an hour's TokenRequest token of the
// ServiceAccount namespace/name, through the administrator's config cfg.
func ServiceAccountToken(ctx context.Context, cfg *rest.Config, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// ServiceAccountConfig reaches cfg's API server as ServiceAccount
// namespace/name, as the processes do.
func ServiceAccountConfig(ctx context.Context, cfg *rest.Config, namespace, name string) (*rest.Config, error) {
	token, err := ServiceAccountToken(ctx, cfg, namespace, name)
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, BearerToken: token}, nil
}

// WriteTokenKubeconfig writes dir/kubeconfig, which authenticates to cfg's
// API server as the ServiceAccount namespace/name with a TokenRequest
// token, and returns its path.
func WriteTokenKubeconfig(ctx context.Context, cfg *rest.Config, namespace, name, dir string) (string, error) {
	token, err := ServiceAccountToken(ctx, cfg, namespace, name)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = "test"
	path := filepath.Join(dir, "kubeconfig")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return path, clientcmd.WriteToFile(*kc, path)
}
