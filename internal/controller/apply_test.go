package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAUserDataSecretIsRewrittenOnlyWhenWhatItHoldsDiffers(t *testing.T) {
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}},
		Type:       corev1.SecretType("cluster.x-k8s.io/secret"),
		Data:       map[string][]byte{"value": []byte("pointer"), "format": []byte("ignition")},
	}
	for _, tc := range []struct {
		name  string
		edit  func(*corev1.Secret)
		holds bool
	}{
		{"the same", func(*corev1.Secret) {}, true},
		{"with labels and annotations of others besides", func(s *corev1.Secret) {
			s.Labels["other"], s.Annotations["other"] = "x", "y"
		}, true},
		{"other data", func(s *corev1.Secret) { s.Data["value"] = []byte("edited") }, false},
		{"a key more", func(s *corev1.Secret) { s.Data["extra"] = nil }, false},
		{"a key less", func(s *corev1.Secret) { delete(s.Data, "format") }, false},
		{"another type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, false},
		{"a label changed", func(s *corev1.Secret) { s.Labels["a"] = "2" }, false},
		{"an annotation gone", func(s *corev1.Secret) { s.Annotations = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := desired.DeepCopy()
			tc.edit(old)
			if got := secretHolds(old, desired); got != tc.holds {
				t.Fatalf("secretHolds = %v, want %v", got, tc.holds)
			}
		})
	}
}
