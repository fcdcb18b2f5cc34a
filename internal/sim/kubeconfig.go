package sim

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigFor renders cfg as a self-contained kubeconfig for cluster:
// file references (CA, client certificate, token file) are inlined, so the
// kubeconfig works wherever the Secret holding it is read.
func kubeconfigFor(cfg *rest.Config, cluster string) ([]byte, error) {
	read := func(data []byte, file, what string) ([]byte, error) {
		if len(data) > 0 || file == "" {
			return data, nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the %s of the workload API server configuration: %w", what, err)
		}
		return b, nil
	}
	ca, err := read(cfg.CAData, cfg.CAFile, "CA")
	if err != nil {
		return nil, err
	}
	cert, err := read(cfg.CertData, cfg.CertFile, "client certificate")
	if err != nil {
		return nil, err
	}
	key, err := read(cfg.KeyData, cfg.KeyFile, "client key")
	if err != nil {
		return nil, err
	}
	token := []byte(cfg.BearerToken)
	if token, err = read(token, cfg.BearerTokenFile, "bearer token"); err != nil {
		return nil, err
	}
	user := cluster + "-admin"
	context := user + "@" + cluster
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{cluster: {
			Server:                   cfg.Host,
			CertificateAuthorityData: ca,
			InsecureSkipTLSVerify:    cfg.Insecure,
			TLSServerName:            cfg.ServerName,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{user: {
			ClientCertificateData: cert,
			ClientKeyData:         key,
			Token:                 string(token),
			Username:              cfg.Username,
			Password:              cfg.Password,
		}},
		Contexts:       map[string]*clientcmdapi.Context{context: {Cluster: cluster, AuthInfo: user}},
		CurrentContext: context,
	}
	b, err := clientcmd.Write(kc)
	if err != nil {
		return nil, fmt.Errorf("encoding the kubeconfig of cluster %s: %w", cluster, err)
	}
	return b, nil
}
