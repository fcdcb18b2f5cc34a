package history

import (
	"bytes"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The archive: a copy of a pool's records in one Secret it controls,
// <pool>-history. clusterctl move carries a pool's Secrets (they are in
// its Cluster's hierarchy) but no ControllerRevision: the controller keeps
// the archive equal to the records, and a pool that has been rolled out
// but has no record (a pool moved to another management cluster, whose
// status, and so its status.revisions, a move does not carry) gets its
// records back from it, under the same names and numbers.

// TypeArchive is the archive Secret's type.
const TypeArchive corev1.SecretType = "nodepool.dev/history"

// KeyArchive holds the records, a JSON list oldest first.
const KeyArchive = "records"

// ArchiveName is the name of a pool's archive Secret.
func ArchiveName(pool string) string { return pool + "-history" }

// archived is one record as the archive keeps it.
type archived struct {
	Name        string            `json:"name"`
	Revision    int64             `json:"revision"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Data        json.RawMessage   `json:"data"`
}

// Archive returns the archive Secret of the pool's records (unowned: the
// caller sets the owner reference). Its data is a deterministic function
// of the records' names, numbers, annotations and data.
func Archive(namespace, pool string, records []appsv1.ControllerRevision) (*corev1.Secret, error) {
	crs := append([]appsv1.ControllerRevision(nil), records...)
	Sort(crs)
	list := make([]archived, 0, len(crs))
	for _, cr := range crs {
		list = append(list, archived{Name: cr.Name, Revision: cr.Revision, Labels: cr.Labels, Annotations: cr.Annotations, Data: json.RawMessage(cr.Data.Raw)})
	}
	raw, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("encoding the history archive of pool %s: %w", pool, err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: ArchiveName(pool),
			Labels: map[string]string{nodepoolv1.LabelPool: pool},
		},
		Type: TypeArchive,
		Data: map[string][]byte{KeyArchive: raw},
	}, nil
}

// SameArchive reports whether archive s holds exactly want's records.
func SameArchive(s, want *corev1.Secret) bool {
	return s.Type == want.Type && bytes.Equal(s.Data[KeyArchive], want.Data[KeyArchive])
}

// Unarchive returns the records an archive Secret of pool holds, as new
// ControllerRevisions (unowned), oldest first. A record not named as the
// controller names the pool's revision of its number, or whose data is
// not a record, is an error: nothing is restored from such an archive.
func Unarchive(s *corev1.Secret, pool string) ([]appsv1.ControllerRevision, error) {
	if s.Type != TypeArchive {
		return nil, fmt.Errorf("Secret %s is of type %q, not %q", s.Name, s.Type, TypeArchive)
	}
	var list []archived
	if err := json.Unmarshal(s.Data[KeyArchive], &list); err != nil {
		return nil, fmt.Errorf("Secret %s key %s: %w", s.Name, KeyArchive, err)
	}
	out := make([]appsv1.ControllerRevision, 0, len(list))
	for _, a := range list {
		if a.Name != Name(pool, a.Revision) {
			return nil, fmt.Errorf("Secret %s holds a record named %q for revision %d, not %q", s.Name, a.Name, a.Revision, Name(pool, a.Revision))
		}
		labels := map[string]string{}
		for k, v := range a.Labels {
			labels[k] = v
		}
		labels[nodepoolv1.LabelPool] = pool
		cr := appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: s.Namespace, Name: a.Name,
				Labels: labels, Annotations: a.Annotations,
			},
			Data:     runtime.RawExtension{Raw: a.Data},
			Revision: a.Revision,
		}
		if _, err := Decode(&cr); err != nil {
			return nil, fmt.Errorf("Secret %s: %w", s.Name, err)
		}
		out = append(out, cr)
	}
	Sort(out)
	return out, nil
}
