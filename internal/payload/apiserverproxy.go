package payload

import (
	"fmt"
	"net"
	"strconv"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"nodepool.dev/nodepool/internal/inputs"
)

// The API-server proxy is a static pod on every node that forwards
// APIServerProxyListen to the cluster's control-plane endpoint. Its
// configuration (the endpoint: owner intent, a stale one breaks nodes) and
// its pod (the image: platform) are separate components.
const (
	// APIServerProxyConfigDir holds the proxy's configuration.
	APIServerProxyConfigDir = "/etc/kubernetes/apiserver-proxy"
	// APIServerProxyConfigPath is the haproxy configuration.
	APIServerProxyConfigPath = APIServerProxyConfigDir + "/haproxy.cfg"
	// APIServerProxyManifestPath is the static pod manifest.
	APIServerProxyManifestPath = "/etc/kubernetes/manifests/kube-apiserver-proxy.yaml"
	// APIServerProxyListen is where the proxy listens on the node.
	APIServerProxyListen = "127.0.0.1:6443"
)

func renderAPIServerEndpoint(in *inputs.Inputs) (igntypes.Config, error) {
	ep := in.Cluster.Endpoint
	if ep.Host == "" {
		return igntypes.Config{}, fmt.Errorf("the Cluster has no control-plane endpoint")
	}
	backend := net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
	cfg := fmt.Sprintf(`# Rendered by nodepool from the Cluster's spec.controlPlaneEndpoint.
global
  maxconn 7000
  log stdout format raw local0 info

defaults
  mode tcp
  log global
  option dontlognull
  retries 3
  timeout connect 10s
  timeout client 30m
  timeout server 30m
  timeout client-fin 5s
  timeout server-fin 5s

frontend local-apiserver
  bind %s
  default_backend control-plane

backend control-plane
  server control-plane %s
`, APIServerProxyListen, backend)
	return withFiles(file(APIServerProxyConfigPath, 0o644, []byte(cfg))), nil
}

func renderAPIServerProxy(in *inputs.Inputs) (igntypes.Config, error) {
	image := in.Management.APIServerProxyImage
	if image == "" {
		return igntypes.Config{}, fmt.Errorf("the management config has no apiServerProxyImage")
	}
	hostPathDir := corev1.HostPathDirectory
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "kube-apiserver-proxy",
			Namespace: "kube-system",
			Labels:    map[string]string{"k8s-app": "kube-apiserver-proxy"},
		},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{
				Name:    "haproxy",
				Image:   image,
				Command: []string{"haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"},
				VolumeMounts: []corev1.VolumeMount{{
					Name: "config", MountPath: "/usr/local/etc/haproxy", ReadOnly: true,
				}},
			}},
			Volumes: []corev1.Volume{{
				Name: "config",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: APIServerProxyConfigDir, Type: &hostPathDir,
				}},
			}},
		},
	}
	b, err := yaml.Marshal(pod)
	if err != nil {
		return igntypes.Config{}, fmt.Errorf("encoding the API-server proxy pod: %w", err)
	}
	return withFiles(file(APIServerProxyManifestPath, 0o644, b)), nil
}
