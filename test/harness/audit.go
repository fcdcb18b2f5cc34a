package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy logs writes only, at the Metadata level (no bodies), once
// each (when the response is sent).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

func configureAudit(env *envtest.Environment, path string) error {
	policy := filepath.Join(filepath.Dir(path), "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", path)
	args.Set("audit-log-format", "json")
	args.Set("audit-log-mode", "batch") // the API server never waits for the log
	args.Set("audit-log-maxsize", "0")  // never rotated
	return nil
}

// AuditWrite is one write the API server logged (Options.AuditLog).
type AuditWrite struct {
	// Agent is the client's user agent up to its first "/" (its name, not
	// its version or platform).
	Agent string
	// Resource is the resource written, with its subresource
	// ("nodepools/status").
	Resource  string
	Verb      string
	Namespace string
	Name      string
	// Code is the response's status code (409: a conflict).
	Code int
	At   time.Time
}

type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// ReadAudit reads the writes of an audit log (Options.AuditLog) made in
// [from, to); a zero to reads to the end. The batch log is written a
// second or so after the writes.
func ReadAudit(path string, from, to time.Time) ([]AuditWrite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []AuditWrite
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil || e.ObjectRef == nil {
			continue
		}
		if e.StageTimestamp.Before(from) || (!to.IsZero() && !e.StageTimestamp.Before(to)) {
			continue
		}
		w := AuditWrite{Agent: e.UserAgent, Resource: e.ObjectRef.Resource, Verb: e.Verb, Namespace: e.ObjectRef.Namespace,
			Name: e.ObjectRef.Name, At: e.StageTimestamp}
		if i := strings.IndexByte(w.Agent, '/'); i >= 0 {
			w.Agent = w.Agent[:i]
		}
		if e.ObjectRef.Subresource != "" {
			w.Resource += "/" + e.ObjectRef.Subresource
		}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		out = append(out, w)
	}
	return out, s.Err()
}
