package userdata

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Keys and values of a Cluster API bootstrap data Secret, the Secret a
// Machine's spec.bootstrap.dataSecretName names.
const (
	// KeyValue holds the user-data.
	KeyValue = "value"
	// KeyFormat says how to read KeyValue.
	KeyFormat = "format"
	// FormatIgnition is the format of an Ignition config.
	FormatIgnition = "ignition"
)

// NewBootstrapSecret returns the bootstrap data Secret namespace/name of a
// machine of cluster clusterName holding userData (an Ignition pointer
// config from Render): type cluster.x-k8s.io/secret, labelled with the
// cluster name as Cluster API expects. Callers add their own labels.
func NewBootstrapSecret(namespace, name, clusterName string, userData []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    map[string]string{clusterv1.ClusterNameLabel: clusterName},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{
			KeyValue:  userData,
			KeyFormat: []byte(FormatIgnition),
		},
	}
}

// ReadBootstrapSecret returns the user-data of a bootstrap data Secret. It
// fails when the Secret has no key "value" or declares a format other than
// ignition (cloud-config user-data cannot boot a nodepool machine).
func ReadBootstrapSecret(s *corev1.Secret) ([]byte, error) {
	if s == nil {
		return nil, errors.New("no bootstrap data Secret")
	}
	if f, ok := s.Data[KeyFormat]; ok && string(f) != FormatIgnition {
		return nil, fmt.Errorf("bootstrap data Secret %s/%s has format %q: a nodepool machine boots Ignition only (key %q must be %q)", s.Namespace, s.Name, f, KeyFormat, FormatIgnition)
	}
	v, ok := s.Data[KeyValue]
	if !ok {
		return nil, fmt.Errorf("bootstrap data Secret %s/%s has no key %q holding the user-data", s.Namespace, s.Name, KeyValue)
	}
	return v, nil
}
