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
