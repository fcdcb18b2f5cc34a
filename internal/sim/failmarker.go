package sim

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"encoding/base64"

	"github.com/coreos/ignition/v2/config/v3_5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// FailAfterPath is the file a payload carries to make the simulated
// machines that run it turn NotReady: its content is a duration (such as
// "5s"), counted from when the machine ran the payload. Put it in a user
// config fragment to make a bad payload:
//
//	storage:
//	  files:
//	    - path: /etc/nodepool-sim/fail-after
//	      contents: {source: "data:,5s"}
const FailAfterPath = "/etc/nodepool-sim/fail-after"

// failAfter reads the fail-after marker of an Ignition payload: nil when it
// has none. A marker that is not a duration is an error (the machine does
// not boot, as for any invalid payload).
func failAfter(ignition []byte) (*time.Duration, error) {
	cfg, _, err := v3_5.Parse(ignition)
	if err != nil {
		return nil, err
	}
	for _, f := range cfg.Storage.Files {
		if f.Path != FailAfterPath || f.Contents.Source == nil {
			continue
		}
		raw, err := dataURL(*f.Contents.Source)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", FailAfterPath, err)
		}
		d, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s must hold a duration such as 5s, got %q", FailAfterPath, raw)
		}
		return &d, nil
	}
	return nil, nil
}

// dataURL decodes a data: URL's content, plain (percent-encoded) or base64.
func dataURL(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", fmt.Errorf("only data: URLs are read, got %q", s)
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", fmt.Errorf("malformed data: URL")
	}
	if strings.HasSuffix(meta, ";base64") {
		b, err := base64.StdEncoding.DecodeString(data)
		return string(b), err
	}
	return url.PathUnescape(data)
}

// failedByPayload reports whether the machine's payload has made its Node
// fail by now, and otherwise how long until it does (0: never).
func failedByPayload(sm *simv1.SimMachine, now time.Time) (bool, time.Duration) {
	if sm.Status.FailAt == nil {
		return false, 0
	}
	if !now.Before(sm.Status.FailAt.Time) {
		return true, 0
	}
	return false, sm.Status.FailAt.Sub(now)
}

// failAtTime is when a machine that ran a payload with a fail-after
// marker at now turns NotReady.
func failAtTime(now time.Time, after time.Duration) *metav1.Time {
	return &metav1.Time{Time: now.Add(after)}
}

// FailAfterConfig is a user config (an Ignition fragment for a NodePool's
// spec.config) that makes the simulated machines booting it turn NotReady
// d after they ran it.
func FailAfterConfig(d time.Duration) string {
	return fmt.Sprintf("ignition: {version: 3.4.0}\nstorage:\n  files:\n    - path: %s\n      mode: 0644\n      contents: {source: \"data:,%s\"}\n", FailAfterPath, d)
}
