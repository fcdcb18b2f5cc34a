package settings

import (
	"strings"
	"testing"
	"time"
)

func TestPublishedSettingsRoundTrip(t *testing.T) {
	p := Published{PayloadServerURL: "https://payload.example:8443/ignition", PayloadServerCA: "-----BEGIN CERTIFICATE-----\n",
		RendererVersion: "v0.2.0", ManagementConfig: "nodepool-system/management-config",
		TokenTTL: 4 * time.Hour, CleanupGracePeriod: 10 * time.Minute, NodeAgentTimeout: 30 * time.Minute, ResyncPeriod: 5 * time.Minute}
	got, err := Decode(ConfigMap(DefaultNamespace, p))
	if err != nil || got != p {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, p)
	}
}

func TestDecodeNamesTheKeyThatIsWrong(t *testing.T) {
	cm := ConfigMap(DefaultNamespace, Published{PayloadServerURL: "u", PayloadServerCA: "c", RendererVersion: "r", ManagementConfig: "a/b"})
	cm.Data[KeyTokenTTL] = "four hours"
	if _, err := Decode(cm); err == nil || !strings.Contains(err.Error(), KeyTokenTTL) {
		t.Errorf("err = %v, want it to name %s", err, KeyTokenTTL)
	}
	delete(cm.Data, KeyPayloadServerURL)
	if _, err := Decode(cm); err == nil || !strings.Contains(err.Error(), KeyPayloadServerURL) {
		t.Errorf("err = %v, want it to name %s", err, KeyPayloadServerURL)
	}
}

// The published settings are the controller's, never a pool's: the
// ConfigMap has the same keys and size at 1 pool as at 10,000, far below
// the 1 MiB a ConfigMap may hold, even with a CA bundle of 16 certificates.
func TestPublishedSettingsStayTheSameSizeWhateverThePools(t *testing.T) {
	cert := "-----BEGIN CERTIFICATE-----\n" + strings.Repeat(strings.Repeat("A", 64)+"\n", 20) + "-----END CERTIFICATE-----\n"
	p := Published{PayloadServerURL: "https://nodepool-payload-server.nodepool-system.svc:8443/ignition", PayloadServerCA: strings.Repeat(cert, 16),
		RendererVersion: "v0.2.0", ManagementConfig: "nodepool-system/management-config",
		TokenTTL: 4 * time.Hour, CleanupGracePeriod: 10 * time.Minute, NodeAgentTimeout: 30 * time.Minute, ResyncPeriod: 5 * time.Minute}
	cm := ConfigMap(DefaultNamespace, p)
	if len(cm.Data) != 8 {
		t.Errorf("the settings ConfigMap has %d keys, want the 8 settings", len(cm.Data))
	}
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	if size > 32<<10 {
		t.Errorf("the settings ConfigMap holds %d bytes, want under 32 KiB", size)
	}
	t.Logf("settings ConfigMap: %d keys, %d bytes with a CA bundle of 16 certificates", len(cm.Data), size)
}
