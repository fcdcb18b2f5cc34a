// Package settings is the one documented place where the controller
// publishes the settings a prediction needs: the ConfigMap
// nodepool-controller-settings in the controller's namespace. The
// controller writes it; `kubectl nodepool plan`, `diff` and `rollout
// status` read it, so they render, hash and decide as the controller does
// and never carry defaults of their own.
package settings

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMapName is the name of the published-settings ConfigMap.
const ConfigMapName = "nodepool-controller-settings"

// DefaultNamespace is the controller's namespace in the shipped manifests.
const DefaultNamespace = "nodepool-system"

// Keys of the published-settings ConfigMap.
const (
	KeyPayloadServerURL   = "payloadServerURL"
	KeyPayloadServerCA    = "payloadServerCA"
	KeyRendererVersion    = "rendererVersion"
	KeyManagementConfig   = "managementConfig"
	KeyTokenTTL           = "tokenTTL"
	KeyCleanupGracePeriod = "cleanupGracePeriod"
	KeyNodeAgentTimeout   = "nodeAgentTimeout"
	KeyResyncPeriod       = "resyncPeriod"
)

// Published are the controller's settings as it publishes them.
type Published struct {
	// PayloadServerURL and PayloadServerCA are what every user-data points
	// at (the CA is a public certificate).
	PayloadServerURL, PayloadServerCA string
	// RendererVersion is the payload renderer's version.
	RendererVersion string
	// ManagementConfig is the management config ConfigMap, namespace/name.
	ManagementConfig string
	// Durations of the engine.
	TokenTTL, CleanupGracePeriod, NodeAgentTimeout, ResyncPeriod time.Duration
}

// ConfigMap is the published-settings ConfigMap holding p.
func ConfigMap(namespace string, p Published) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ConfigMapName,
			Labels: map[string]string{"app.kubernetes.io/name": "nodepool-controller", "app.kubernetes.io/component": "settings"}},
		Data: map[string]string{
			KeyPayloadServerURL: p.PayloadServerURL, KeyPayloadServerCA: p.PayloadServerCA,
			KeyRendererVersion: p.RendererVersion, KeyManagementConfig: p.ManagementConfig,
			KeyTokenTTL: p.TokenTTL.String(), KeyCleanupGracePeriod: p.CleanupGracePeriod.String(),
			KeyNodeAgentTimeout: p.NodeAgentTimeout.String(), KeyResyncPeriod: p.ResyncPeriod.String(),
		},
	}
}

// Decode reads a published-settings ConfigMap, naming the key that is
// missing or wrong.
func Decode(cm *corev1.ConfigMap) (Published, error) {
	p := Published{
		PayloadServerURL: cm.Data[KeyPayloadServerURL], PayloadServerCA: cm.Data[KeyPayloadServerCA],
		RendererVersion: cm.Data[KeyRendererVersion], ManagementConfig: cm.Data[KeyManagementConfig],
	}
	for key, v := range map[string]string{KeyPayloadServerURL: p.PayloadServerURL, KeyPayloadServerCA: p.PayloadServerCA,
		KeyRendererVersion: p.RendererVersion, KeyManagementConfig: p.ManagementConfig} {
		if v == "" {
			return Published{}, fmt.Errorf("ConfigMap %s/%s has no key %s", cm.Namespace, cm.Name, key)
		}
	}
	for key, d := range map[string]*time.Duration{KeyTokenTTL: &p.TokenTTL, KeyCleanupGracePeriod: &p.CleanupGracePeriod,
		KeyNodeAgentTimeout: &p.NodeAgentTimeout, KeyResyncPeriod: &p.ResyncPeriod} {
		v, err := time.ParseDuration(cm.Data[key])
		if err != nil {
			return Published{}, fmt.Errorf("ConfigMap %s/%s key %s: %q is not a duration", cm.Namespace, cm.Name, key, cm.Data[key])
		}
		*d = v
	}
	return p, nil
}
