package payload_test

import (
	"bytes"
	"testing"

	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
)

func TestSettingsOfReadsBackWhatRenderWasGiven(t *testing.T) {
	w := inputstest.New()
	pl, _ := render(t, w)
	got, err := payload.SettingsOf(pl)
	if err != nil {
		t.Fatal(err)
	}
	if got.PayloadServerURL != w.Settings.PayloadServerURL || !bytes.Equal(got.PayloadServerCA, w.Settings.PayloadServerCA) || got.RendererVersion != w.Settings.RendererVersion {
		t.Errorf("SettingsOf = %q, %d bytes of CA, %q; rendered with %q, %d bytes, %q", got.PayloadServerURL, len(got.PayloadServerCA), got.RendererVersion,
			w.Settings.PayloadServerURL, len(w.Settings.PayloadServerCA), w.Settings.RendererVersion)
	}
	// Rendering again with the recovered settings gives the same payload.
	w.Settings = got
	again, _ := render(t, w)
	if again.Hash != pl.Hash {
		t.Errorf("re-rendered with recovered settings: payload %s, want %s", again.Hash, pl.Hash)
	}
}
