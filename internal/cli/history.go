package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

func newHistoryCommand(o *Options) *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:   "history POOL",
		Short: "List a pool's rollouts, or show one with --revision",
		Long: `List the rollouts of a NodePool, oldest first, from its record (one
ControllerRevision per rollout, owned by the pool): who started each one
(initiator spec, version, restart, platform or policy), its outcome, when it
started and how long it took, its rollout and payload hashes (the prefixes in
the user-data Secret names and node labels) and the payload components it
changed. A change someone made outside the pool to its MachineDeployment or
MachineSets (initiator external, outcome Reverted) shows the field manager that
wrote it after the initiator and the fields it wrote under CHANGED. The pool keeps the last spec.management.revisionHistoryLimit
finished rollouts (default 10) and any in progress; the line after the table
says how many.

With --revision N, show that rollout in full: times, hashes, the ConfigMaps and
Secrets it referenced with whether their content changed since, and the
owner-facing spec it rolled out (what rollout undo restores).`,
		Example: `  kubectl nodepool rollout history workers
  kubectl nodepool rollout history workers --revision 3
  kubectl nodepool rollout history workers -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, pool, err := o.getPool(ctx, args[0])
			if err != nil {
				return err
			}
			entries, err := revisions(ctx, c, pool)
			if err != nil {
				return err
			}
			if revision != 0 {
				e, err := findRevision(pool, entries, revision)
				if err != nil {
					return err
				}
				detail, err := describeRevision(ctx, c, pool, e)
				if err != nil {
					return err
				}
				if !o.tabular() {
					return o.printStructured(detail, poolObject(pool.Name))
				}
				return printRevision(o.out(), o.now(), detail)
			}
			if !o.tabular() {
				if entries == nil {
					entries = []history.Entry{}
				}
				return o.printStructured(entries, poolObject(pool.Name))
			}
			if len(entries) == 0 {
				_, err := fmt.Fprintf(o.out(), "No rollouts recorded for %s yet.\n", poolRef(pool))
				return err
			}
			if err := historyTable(o.now(), entries).print(o.out()); err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.out(), "\n%s", historyLimitNote(pool))
			return err
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "show this revision in full")
	return cmd
}

// revisions returns the pool's rollout records, oldest first.
func revisions(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool) ([]history.Entry, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing the rollout history (ControllerRevisions) of %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	owned := history.Records(pool, list.Items)
	var out []history.Entry
	for i := range owned {
		e, err := history.Decode(&owned[i])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func findRevision(pool *nodepoolv1.NodePool, entries []history.Entry, n int64) (history.Entry, error) {
	var have []string
	for _, e := range entries {
		if e.Revision == n {
			return e, nil
		}
		have = append(have, fmt.Sprint(e.Revision))
	}
	if len(have) == 0 {
		return history.Entry{}, fmt.Errorf("revision %d of %s not found: no rollout is recorded", n, poolRef(pool))
	}
	return history.Entry{}, fmt.Errorf("revision %d of %s not found: recorded revisions are %s", n, poolRef(pool), strings.Join(have, ", "))
}

func historyTable(now time.Time, entries []history.Entry) *table {
	t := &table{header: []string{"REVISION", "INITIATOR", "OUTCOME", "STARTED", "DURATION", "ROLLOUT", "PAYLOAD", "CHANGED"}}
	reasons := withReasons(entries) // window.go: a REASON column when a rollout has one
	if reasons {
		t.header = append(t.header, "REASON")
	}
	for _, e := range entries {
		row := []string{fmt.Sprint(e.Revision), initiatorOf(e), or(e.Outcome, "-"), age(now, e.Started) + " ago", took(now, e),
			payload.Short(e.RolloutHash), payload.Short(e.PayloadHash), changedOf(e)}
		if reasons {
			row = append(row, or(e.Reason, "-"))
		}
		t.add(row...)
	}
	return t
}

// took is how long a rollout took, or has taken so far.
func took(now time.Time, e history.Entry) string {
	if e.Completed != nil {
		return age(*e.Completed, e.Started)
	}
	if e.Outcome == history.OutcomeInProgress {
		return age(now, e.Started) + " so far"
	}
	return "-"
}

// changedOf is the CHANGED column: the payload components a rollout
// changed, or the fields a change made outside the pool wrote.
func changedOf(e history.Entry) string {
	if e.Initiator == history.InitiatorExternal && len(e.Fields) > 0 {
		return strings.Join(e.Fields, ",")
	}
	return changedList(e.Changed)
}

// changedList names the changed components; "all" when every component is
// new (a pool's first rollout).
func changedList(changed []string) string {
	if len(changed) == 0 {
		return "-"
	}
	all := true
	for _, c := range inputs.Components() {
		if !slices.Contains(changed, c.Name()) {
			all = false
		}
	}
	if all {
		return "all (new pool)"
	}
	return strings.Join(changed, ",")
}

// SourceState is a ConfigMap or Secret a revision referenced, with the
// digest recorded then and its content now.
type SourceState struct {
	history.Source
	// Current is the digest of its content now, "" when it is gone.
	Current string `json:"current"`
	// State is unchanged, changed, missing or unreadable (the user may
	// not get it: Reason names the permission).
	State string `json:"state"`
	// Reason says why an unreadable source could not be compared.
	Reason string `json:"reason,omitempty"`
}

// Source states.
const (
	SourceUnchanged = "unchanged"
	SourceChanged   = "changed"
	SourceMissing   = "missing"
	// SourceUnreadable: the user may not read the source (a pull secret
	// with only the view role), so it is not compared.
	SourceUnreadable = "unreadable"
)

// RevisionDetail is one revision with the current state of its sources.
type RevisionDetail struct {
	history.Entry
	SourceStates []SourceState `json:"sourceStates,omitempty"`
}

func describeRevision(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, e history.Entry) (RevisionDetail, error) {
	d := RevisionDetail{Entry: e}
	for _, s := range e.Sources {
		st, err := sourceState(ctx, c, pool.Namespace, s)
		if err != nil {
			return d, err
		}
		d.SourceStates = append(d.SourceStates, st)
	}
	return d, nil
}

// sourceState compares a recorded source with the object now.
func sourceState(ctx context.Context, c client.Reader, namespace string, s history.Source) (SourceState, error) {
	st := SourceState{Source: s}
	var obj client.Object
	switch s.Kind {
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	case "Secret":
		obj = &corev1.Secret{}
	default:
		return st, fmt.Errorf("the record names a source of kind %q (%s), which this kubectl-nodepool does not know: upgrade it", s.Kind, s.Name)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: s.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			st.State = SourceMissing
			return st, nil
		}
		if apierrors.IsForbidden(err) {
			st.State, st.Reason = SourceUnreadable, fmt.Sprintf("comparing it needs get %ss in namespace %s", strings.ToLower(s.Kind), namespace)
			return st, nil
		}
		return st, fmt.Errorf("reading %s %s/%s: %w", s.Kind, namespace, s.Name, err)
	}
	d, err := inputs.SourceDigest(obj)
	if err != nil {
		return st, err
	}
	st.Current, st.State = d, SourceUnchanged
	if d != s.Digest {
		st.State = SourceChanged
	}
	return st, nil
}

func printRevision(w io.Writer, now time.Time, d RevisionDetail) error {
	e := d.Entry
	fmt.Fprintf(w, "Revision:      %d\n", e.Revision)
	fmt.Fprintf(w, "Initiator:     %s\n", e.Initiator)
	if e.Initiator == history.InitiatorExternal {
		fmt.Fprintf(w, "Manager:       %s\n", or(e.Manager, "-"))
		fmt.Fprintf(w, "Fields:        %s\n", or(strings.Join(e.Fields, ", "), "-"))
	}
	fmt.Fprintf(w, "Outcome:       %s\n", or(e.Outcome, "-"))
	fmt.Fprintf(w, "Started:       %s (%s ago)\n", e.Started.UTC().Format(time.RFC3339), age(now, e.Started))
	if e.Completed != nil {
		fmt.Fprintf(w, "Completed:     %s (took %s)\n", e.Completed.UTC().Format(time.RFC3339), took(now, e))
	}
	if e.Reason != "" {
		fmt.Fprintf(w, "Reason:        %s\n", e.Reason)
	}
	if e.ForcedAt != nil {
		fmt.Fprintf(w, "Forced:        every machine created before %s replaced\n", e.ForcedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "Rollout hash:  %s\n", e.RolloutHash)
	fmt.Fprintf(w, "Payload hash:  %s\n", e.PayloadHash)
	fmt.Fprintf(w, "Changed:       %s\n", changedList(e.Changed))
	if len(d.SourceStates) > 0 {
		fmt.Fprintln(w, "Sources:")
		t := &table{header: []string{"  KIND", "NAME", "RECORDED", "NOW"}}
		for _, s := range d.SourceStates {
			state := s.State
			if s.Reason != "" {
				state += " (" + s.Reason + ")"
			}
			t.add("  "+s.Kind, s.Name, shortDigest(s.Digest), state)
		}
		if err := t.print(w); err != nil {
			return err
		}
	}
	spec, err := yaml.Marshal(e.Spec)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "Spec:")
	for _, l := range strings.Split(strings.TrimRight(string(spec), "\n"), "\n") {
		fmt.Fprintln(w, "  "+l)
	}
	return nil
}

// shortDigest is "sha256:" and the short hash of a digest.
func shortDigest(d string) string {
	if d == "" {
		return "-"
	}
	if h, ok := strings.CutPrefix(d, "sha256:"); ok {
		return "sha256:" + payload.Short(h)
	}
	return d
}

// initiatorOf names who started a rollout; a health-gate rollback names
// the revision that failed, a change made outside the pool its field
// manager.
func initiatorOf(e history.Entry) string {
	if e.Initiator == history.InitiatorExternal && e.Manager != "" {
		return fmt.Sprintf("%s (%s)", e.Initiator, e.Manager)
	}
	if e.RollbackOf > 0 {
		return fmt.Sprintf("%s (of %d)", e.Initiator, e.RollbackOf)
	}
	return e.Initiator
}

// historyLimitNote says how many finished rollouts the pool's record keeps
// (the controller prunes older ones).
func historyLimitNote(pool *nodepoolv1.NodePool) string {
	l := pool.Spec.Management.RevisionHistoryLimit
	switch {
	case l == nil:
		return "Keeps as many finished rollouts as the controller's --history-limit (10 unless set): spec.management.revisionHistoryLimit is unset.\n"
	case *l == 0:
		return "Keeps no finished rollout, only one in progress (spec.management.revisionHistoryLimit: 0).\n"
	}
	return fmt.Sprintf("Keeps the last %d finished rollouts and any in progress (spec.management.revisionHistoryLimit).\n", *l)
}
