package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"nodepool.dev/nodepool/internal/history"
)

// `rollout history` says, of a change made outside the pool (initiator
// external), who made it (the field manager) and which fields, in the
// table and with --revision.
func TestRolloutHistoryShowsTheFieldManagerAndTheFieldsOfAnExternalChange(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	done := now.Add(-time.Minute)
	x := history.Entry{Revision: 4, Initiator: history.InitiatorExternal, Outcome: history.OutcomeReverted, Started: now.Add(-2 * time.Minute), Completed: &done,
		Manager: "kubectl-patch", Fields: []string{"spec.rollout.after", "spec.template.spec.version"}}
	var table bytes.Buffer
	if err := historyTable(now, []history.Entry{x}).print(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"external (kubectl-patch)", "spec.rollout.after,spec.template.spec.version"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the history table does not say %q:\n%s", want, table.String())
		}
	}
	var detail bytes.Buffer
	if err := printRevision(&detail, now, RevisionDetail{Entry: x}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Manager:       kubectl-patch\n", "Fields:        spec.rollout.after, spec.template.spec.version\n"} {
		if !strings.Contains(detail.String(), want) {
			t.Errorf("--revision 4 does not say %q:\n%s", want, detail.String())
		}
	}
}
