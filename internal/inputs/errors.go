package inputs

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// ReasonClusterNotReady says the CAPI Cluster exists but does not yet have
// what a payload needs (its control-plane endpoint).
const ReasonClusterNotReady = nodepoolv1.ReasonClusterNotReady

// ConfigError is an input the controller cannot use: a referenced object
// is missing or its content is refused. Its Reason is a condition reason of
// api/v1alpha1 (ConfigNotFound, InvalidConfig, ClusterNotFound) or
// ReasonClusterNotReady, and its message names the object and says what to do.
// Nothing in it is transient: retrying without a change gives the same error.
type ConfigError struct {
	// Reason is the condition reason to report.
	Reason string
	// Kind of the object at fault: ConfigMap, Secret, Cluster, NodePool or an
	// infrastructure template kind.
	Kind string
	// Object is the namespace and name of the object at fault.
	Object types.NamespacedName
	// Err says what is wrong.
	Err error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Kind, e.Object, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Reason returns the condition reason of the first ConfigError in err, or ""
// if err carries none (a transient error: retry).
func Reason(err error) string {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

func notFound(kind string, key types.NamespacedName, format string, args ...any) *ConfigError {
	return &ConfigError{Reason: nodepoolv1.ReasonConfigNotFound, Kind: kind, Object: key, Err: fmt.Errorf(format, args...)}
}

func invalid(kind string, key types.NamespacedName, err error) *ConfigError {
	return &ConfigError{Reason: nodepoolv1.ReasonInvalidConfig, Kind: kind, Object: key, Err: err}
}

// DocumentError is a refused document of a user config. Index counts the
// documents of the ConfigMap's "config" key from 1, as a person would.
type DocumentError struct {
	Index int
	Err   error
}

func (e *DocumentError) Error() string {
	return fmt.Sprintf("document %d: %v", e.Index, e.Err)
}

func (e *DocumentError) Unwrap() error { return e.Err }

// FieldError is a refused field of a typed config (the management config or
// the NodePool spec); Field is its path, such as registryOverrides[1].mirror.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// joinErrors is errors.Join on one line ("; "), as a condition message
// reads best; nil for none, the error itself for one.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return multiError(errs)
}

type multiError []error

func (m multiError) Error() string {
	msgs := make([]string, len(m))
	for i, e := range m {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

func (m multiError) Unwrap() []error { return m }
