package userdata

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestBootstrapSecret(t *testing.T) {
	s := NewBootstrapSecret("ns", "pool-userdata-abc", "c1", []byte(`{"ignition":{}}`))
	if s.Type != "cluster.x-k8s.io/secret" || s.Labels["cluster.x-k8s.io/cluster-name"] != "c1" || string(s.Data["format"]) != "ignition" {
		t.Fatalf("not a Cluster API bootstrap data Secret: %+v", s)
	}
	got, err := ReadBootstrapSecret(s)
	if err != nil || string(got) != `{"ignition":{}}` {
		t.Fatalf("ReadBootstrapSecret = %q, %v", got, err)
	}

	tests := []struct {
		name    string
		data    map[string][]byte
		wantErr string
	}{
		{name: "no format is read as ignition", data: map[string][]byte{"value": []byte("x")}},
		{name: "cloud-config", data: map[string][]byte{"value": []byte("x"), "format": []byte("cloud-config")}, wantErr: `has format "cloud-config"`},
		{name: "no value", data: map[string][]byte{"format": []byte("ignition")}, wantErr: `has no key "value"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadBootstrapSecret(&corev1.Secret{Data: tt.data})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}
