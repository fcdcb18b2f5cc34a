package observe

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/gather"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/secrets"
)

// Latest gathers the pool's inputs through c, renders the latest payload
// and fills in.Latest, in.Hashes, in.TemplateName and in.RenderErr. A
// problem with the pool's inputs (a missing or bad ConfigMap, an invalid
// payload) is not an error: it is in.RenderErr, and the gathered inputs
// are nil. The error returned is transient (the API server could not be
// read): retry.
func Latest(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, s inputs.Settings, in *rollout.Input) (*inputs.Inputs, error) {
	gathered, err := gather.Gather(ctx, c, pool, s)
	if err != nil && inputs.Reason(err) == "" {
		return nil, fmt.Errorf("gathering inputs: %w", err)
	}
	if err == nil {
		in.Latest, in.Hashes, err = payload.Render(gathered)
		if err == nil {
			in.TemplateName = payload.InfrastructureTemplateName(pool.Name, payload.TemplateHash(gathered.InfrastructureTemplate))
		}
	}
	in.RenderErr = err
	if err != nil {
		return nil, nil
	}
	return gathered, nil
}

// Objects is what one read of a pool found, as read.
type Objects struct {
	// MachineDeployment is the pool's, nil if absent (and for InPlace pools).
	MachineDeployment *clusterv1.MachineDeployment
	// InPlaceSet is an InPlace pool's MachineSet, nil if absent.
	InPlaceSet  *clusterv1.MachineSet
	MachineSets []clusterv1.MachineSet
	Machines    []clusterv1.Machine
	// UserData and Tokens are the pool's Secrets of that kind, by name.
	UserData map[string]*corev1.Secret
	Tokens   map[string]*corev1.Secret
	// DecodedTokens are Tokens decoded, by name.
	DecodedTokens map[string]secrets.Token
	// Payloads are the pool's payload Secrets, by payload hash.
	Payloads map[string]*corev1.Secret
	// Unreadable are the pool's own token Secrets whose content does not
	// decode (edited by hand), by name: the controller rewrites them.
	Unreadable map[string]*corev1.Secret
	// Conflicts names objects of the names the pool uses that are not the
	// pool's (no controller reference to it), as "Kind name": they are
	// never read as the pool's, patched or deleted.
	Conflicts []string
	// Records are the pool's rollout records (history.Records), oldest
	// first.
	Records []appsv1.ControllerRevision
	// Refused are the payload Secrets of the pool's labels that are not
	// used (secrets.CheckPayloadName, secrets.DecodePayload), with why.
	Refused []Refusal
}

// Read reads the pool's MachineDeployment, MachineSets, Machines and owned
// Secrets through c, and fills in.MachineDeployment, in.UserData,
// in.Tokens, in.Payloads and in.Referenced. A token Secret that cannot be
// decoded is skipped and logged on log; a payload Secret that is not
// used is in Objects.Refused (readPayload). Nodes are not read: they
// live in the workload cluster.
func Read(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, in *rollout.Input, log logr.Logger) (*Objects, error) {
	return ReadWith(ctx, c, pool, in, log, DecodeWhole)
}

// DecodeWhole is the PayloadDecoder of a reader that holds payload Secrets
// whole: it decodes every one it is given.
func DecodeWhole(_ context.Context, pool string, s *corev1.Secret) (*payload.Payload, error) {
	return secrets.ToPayload(pool, s)
}

// PayloadDecoder reads a payload Secret of pool into its payload; the
// payloads it returns are read, never changed.
type PayloadDecoder func(ctx context.Context, pool string, s *corev1.Secret) (*payload.Payload, error)

// ReadWith is Read decoding payload Secrets with decode (a controller
// decodes each payload Secret once, not at every reconcile).
func ReadWith(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, in *rollout.Input, log logr.Logger, decode PayloadDecoder) (*Objects, error) {
	o := &Objects{UserData: map[string]*corev1.Secret{}, Tokens: map[string]*corev1.Secret{}, DecodedTokens: map[string]secrets.Token{},
		Payloads: map[string]*corev1.Secret{}, Unreadable: map[string]*corev1.Secret{}}
	ns := client.InNamespace(pool.Namespace)
	owned := client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: pool.Name, clusterv1.ClusterNameLabel: pool.Spec.ClusterName}
	inPlace := pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace
	if inPlace {
		// An InPlace pool's MachineSet has no MachineDeployment: Cluster
		// API would look for one if it carried the deployment label.
		owned = client.MatchingLabels{nodepoolv1.LabelPool: pool.Name, clusterv1.ClusterNameLabel: pool.Spec.ClusterName}
		ms := &clusterv1.MachineSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Name}, ms); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading MachineSet: %w", err)
		} else if err == nil && metav1.IsControlledBy(ms, pool) {
			o.InPlaceSet = ms
		} else if err == nil {
			o.Conflicts = append(o.Conflicts, "MachineSet "+ms.Name)
		}
	} else {
		md := &clusterv1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Name}, md); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading MachineDeployment: %w", err)
		} else if err == nil && metav1.IsControlledBy(md, pool) {
			o.MachineDeployment = md
		} else if err == nil {
			o.Conflicts = append(o.Conflicts, "MachineDeployment "+md.Name)
		}
	}
	msList := &clusterv1.MachineSetList{}
	if err := c.List(ctx, msList, ns, owned); err != nil {
		return nil, fmt.Errorf("listing MachineSets: %w", err)
	}
	// Only the pool's own MachineSets count (a hand-made MachineDeployment
	// of the pool's name has MachineSets with the same labels), and only
	// machines of those: everything else is someone else's.
	sets := msList.Items[:0]
	mine, foreign := map[string]bool{}, map[string]bool{}
	for i := range msList.Items {
		ms := msList.Items[i]
		if ownedSet(&ms, pool, o.MachineDeployment, inPlace) {
			sets = append(sets, ms)
			mine[ms.Name] = true
		} else {
			foreign[ms.Name] = true
		}
	}
	msList.Items = sets
	o.MachineSets = msList.Items
	mList := &clusterv1.MachineList{}
	if err := c.List(ctx, mList, ns, owned); err != nil {
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	machines := mList.Items[:0]
	for _, m := range mList.Items {
		set := m.Labels[clusterv1.MachineSetNameLabel]
		if mine[set] || (len(o.Conflicts) == 0 && !foreign[set]) {
			machines = append(machines, m)
		}
	}
	mList.Items = machines
	o.Machines = mList.Items

	in.Referenced = map[string]bool{}
	refer := func(name *string) {
		if name != nil && *name != "" {
			in.Referenced[*name] = true
		}
	}
	if o.MachineDeployment != nil {
		refer(o.MachineDeployment.Spec.Template.Spec.Bootstrap.DataSecretName)
	}
	for i := range msList.Items {
		refer(msList.Items[i].Spec.Template.Spec.Bootstrap.DataSecretName)
	}
	for i := range mList.Items {
		refer(mList.Items[i].Spec.Bootstrap.DataSecretName)
		if inPlace {
			refer(ptr.To(MachineUserData(&mList.Items[i])))
		}
	}

	sList := &corev1.SecretList{}
	if err := c.List(ctx, sList, ns, client.MatchingLabels{secrets.LabelPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing the pool's Secrets: %w", err)
	}
	in.UserData = map[string]rollout.UserData{}
	in.Tokens = map[string]rollout.Token{}
	in.Payloads = map[string]*payload.Payload{}
	for i := range sList.Items {
		s := &sList.Items[i]
		if secrets.KindOf(s) == secrets.KindPayload {
			readPayload(ctx, pool, s, o, in, decode, log)
			continue
		}
		if !metav1.IsControlledBy(s, pool) {
			continue
		}
		switch secrets.KindOf(s) {
		case secrets.KindUserData:
			o.UserData[s.Name] = s
			in.UserData[s.Name] = DecodeUserData(s)
		case secrets.KindToken:
			t, err := secrets.DecodeToken(s)
			if err != nil {
				log.Error(err, "rewriting an unreadable token Secret", "secret", s.Name)
				o.Unreadable[s.Name] = s
				continue
			}
			o.Tokens[s.Name], o.DecodedTokens[s.Name] = s, t
			tok := rollout.Token{Name: s.Name, RolloutHash: t.RolloutHash, PayloadHash: t.PayloadHash, RotatedAt: t.RotatedAt, Created: s.CreationTimestamp.Time}
			if at, ok, _ := secrets.FirstFetch(s); ok {
				tok.FirstFetch = &at
			}
			in.Tokens[s.Name] = tok
		}
	}

	if o.MachineDeployment != nil {
		in.MachineDeployment = Summarize(o.MachineDeployment, msList.Items, mList.Items)
	}
	if o.InPlaceSet != nil {
		in.MachineDeployment, in.InPlace = SummarizeInPlace(pool, o.InPlaceSet, mList.Items)
	}
	crList := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, crList, ns, client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing the pool's history: %w", err)
	}
	o.Records = history.Records(pool, crList.Items)
	in.Current = CurrentRollout(o.Records)
	if pool.Spec.Management.Maintenance != nil {
		// Whether a rollout fits its maintenance window.
		in.RecentRollouts = history.Rollouts(o.Records, history.RecentLimit)
	}
	return o, nil
}

// CurrentRollout is the engine's view of the pool's current rollout
// record (history.Current) among records: its revision and what the
// engine keeps on it (rollout.RecordKeys); nil when there is none.
func CurrentRollout(records []appsv1.ControllerRevision) *rollout.CurrentRollout {
	cr := history.Current(records)
	if cr == nil {
		return nil
	}
	cur := &rollout.CurrentRollout{Revision: cr.Revision, State: map[string]string{},
		InProgress: cr.Annotations[history.AnnotationOutcome] == history.OutcomeInProgress}
	if e, err := history.Decode(cr); err == nil {
		cur.RolloutHash, cur.Started, cur.Forced, cur.ForcedAt = e.RolloutHash, e.Started, e.ForcedAt != nil, e.ForcedAt
	}
	for _, k := range rollout.RecordKeys {
		if v, ok := cr.Annotations[k]; ok && v != "" {
			cur.State[k] = v
		}
	}
	return cur
}

// ownedSet reports whether a MachineSet is the pool's: controlled by the
// pool's MachineDeployment (Replace) or by the pool itself (InPlace).
func ownedSet(ms *clusterv1.MachineSet, pool *nodepoolv1.NodePool, md *clusterv1.MachineDeployment, inPlace bool) bool {
	if inPlace {
		return metav1.IsControlledBy(ms, pool)
	}
	return md != nil && metav1.IsControlledBy(ms, md)
}

// Summarize reduces a MachineDeployment and its MachineSets to what the
// engine needs: the target, what the machines run, and whether the rollout
// is complete.
func Summarize(md *clusterv1.MachineDeployment, sets []clusterv1.MachineSet, machines []clusterv1.Machine) *rollout.MachineDeployment {
	target := ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	out := &rollout.MachineDeployment{
		DataSecretName:   target,
		Version:          md.Spec.Template.Spec.Version,
		SpecReplicas:     md.Spec.Replicas,
		Replicas:         ptr.Deref(md.Status.Replicas, 0),
		ReadyReplicas:    ptr.Deref(md.Status.ReadyReplicas, 0),
		UpToDateReplicas: ptr.Deref(md.Status.UpToDateReplicas, 0),
	}
	// Machine sets that still have machines, oldest first.
	var live []clusterv1.MachineSet
	for _, ms := range sets {
		if ptr.Deref(ms.Status.Replicas, 0) > 0 || ptr.Deref(ms.Spec.Replicas, 0) > 0 {
			live = append(live, ms)
		}
	}
	sort.Slice(live, func(i, j int) bool {
		return live[i].CreationTimestamp.Before(&live[j].CreationTimestamp)
	})
	out.RunningDataSecretName = target
	if len(live) > 0 {
		out.RunningDataSecretName = ptr.Deref(live[0].Spec.Template.Spec.Bootstrap.DataSecretName, target)
	}
	desired := ptr.Deref(md.Spec.Replicas, 0)
	onlyTarget := true
	for _, ms := range live {
		if ptr.Deref(ms.Spec.Template.Spec.Bootstrap.DataSecretName, "") != target || ms.Spec.Template.Spec.Version != md.Spec.Template.Spec.Version {
			onlyTarget = false
		}
	}
	out.TemplateName = md.Spec.Template.Spec.InfrastructureRef.Name
	out.MachinesCreated = machinesCreated(sets, machines)
	if after := md.Spec.Rollout.After; !after.IsZero() {
		t := after.Time
		out.RolloutAfter = &t
		out.MachinesBeforeRolloutAfter = poolmath.CreatedBefore(out.MachinesCreated, t)
	}
	onlyTarget = onlyTarget && out.MachinesBeforeRolloutAfter == 0
	out.Complete = md.Status.ObservedGeneration >= md.Generation && onlyTarget &&
		out.UpToDateReplicas == desired && out.Replicas == desired
	if desired == 0 {
		out.Complete = onlyTarget && md.Status.ObservedGeneration >= md.Generation
	}
	return out
}

// machinesCreated lists, for each machine not being deleted, the time
// Cluster API compares with spec.rollout.after: its MachineSet's creation
// time (the machine's own when the MachineSet is gone).
func machinesCreated(sets []clusterv1.MachineSet, machines []clusterv1.Machine) []time.Time {
	created := make(map[string]time.Time, len(sets))
	for _, ms := range sets {
		created[ms.Name] = ms.CreationTimestamp.Time
	}
	out := make([]time.Time, 0, len(machines))
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		c, ok := created[m.Labels[clusterv1.MachineSetNameLabel]]
		if !ok {
			c = m.CreationTimestamp.Time
		}
		out = append(out, c)
	}
	return out
}
