package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

// What `diff` compares the running payload with.
const (
	AgainstNewNode = "new-node"
	AgainstLatest  = "latest"
)

// PayloadDiff is what the nodes of a pool run against what a new node
// would get now, and the latest payload (what the next rollout brings).
type PayloadDiff struct {
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	// Running is the payload pinned for the pool's nodes, NewNode what a
	// machine created now boots (the payload its token serves), Latest the
	// payload rendered from the current inputs.
	Running string `json:"running"`
	NewNode string `json:"newNode"`
	Latest  string `json:"latest,omitempty"`
	// Against is new-node or latest: the side Diff shows.
	Against    string          `json:"against"`
	Components []ComponentDiff `json:"components"`
	// Nodes counts nodes by the payload (prefix) they booted.
	Nodes    []nodepoolv1.NodePayloadCount `json:"nodes,omitempty"`
	Warnings []string                      `json:"warnings,omitempty"`
}

// ComponentDiff is one component of the three payloads.
type ComponentDiff struct {
	Component string `json:"component"`
	Class     string `json:"class"`
	Delivery  string `json:"delivery,omitempty"`
	Running   string `json:"running"`
	NewNode   string `json:"newNode"`
	Latest    string `json:"latest,omitempty"`
	// Diff is a unified diff of the component's content, running against
	// the other side; secret content is redacted.
	Diff string `json:"diff,omitempty"`
}

func newDiffCommand(o *Options) *cobra.Command {
	var against string
	cmd := &cobra.Command{
		Use:   "diff POOL",
		Short: "Show, component by component, what a new node would boot that the nodes do not run",
		Long: `Compare, component by component, the payload the pool's nodes run with the one a
machine created now would boot (the payload its token serves) and with the
latest payload rendered from the current inputs (what the next rollout brings).
The table gives each component's class (rollout: owner intent; management:
platform), its delivery to new nodes (pinned or fresh) and digests ("=" when
equal to the running one); then the content of each component that differs is
shown as a unified diff. Secret content (the pull secret, and files only their
owner may read) is redacted to its size and digest.

With --against latest, the content diff is against the latest payload instead:
the pending platform changes of status.pendingManagementChanges.`,
		Example: `  # What would a replacement node of workers boot that the others do not run?
  kubectl nodepool diff workers

  # What would the next rollout (or rollout apply-pending) change?
  kubectl nodepool diff workers --against latest`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if against != AgainstNewNode && against != AgainstLatest {
				return fmt.Errorf("--against %q: use new-node or latest", against)
			}
			d, err := o.diff(cmd.Context(), args[0], against)
			if err != nil {
				return o.asAnswer(err)
			}
			if !o.tabular() {
				return o.printStructured(d, poolObject(args[0]))
			}
			return printDiff(o.out(), o.ErrOut, d)
		},
	}
	cmd.Flags().StringVar(&against, "against", AgainstNewNode, "compare the running payload with new-node (what a machine created now boots) or latest (what the next rollout brings)")
	return cmd
}

func (o *Options) diff(ctx context.Context, name, against string) (*PayloadDiff, error) {
	c, pool, err := o.getPool(ctx, name)
	if err != nil {
		return nil, err
	}
	missing, err := o.missingForPrediction(ctx, pool.Namespace)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, &limitedError{fmt.Sprintf("diff cannot compare the payloads of %s: they are stored in the pool's Secrets and the latest one is rendered with the controller's settings; it needs %s. Meanwhile %s.",
			poolRef(pool), missingWords(missing), publishedWords(pool))}
	}
	d, err := o.decide(ctx, c, c, pool)
	if err != nil {
		return nil, err
	}
	in := d.In
	out := &PayloadDiff{Namespace: pool.Namespace, Pool: pool.Name, Against: against, Nodes: pool.Status.Nodes, Warnings: d.Warnings}
	md := in.MachineDeployment
	if md == nil {
		return nil, fmt.Errorf("%s has no machines yet: no node runs a payload", poolRef(pool))
	}
	// What the nodes run and what a new node boots are the engine's: the
	// payload the running user-data's rollout started with, and the one
	// the target's token serves after the controller's next reconcile.
	dec := d.Plan.Decision
	if dec.Running != nil {
		out.Running = dec.Running.PayloadHash
	}
	out.NewNode = dec.TokenPayload
	if in.Latest != nil {
		out.Latest = in.Latest.Hash
	} else if in.RenderErr != nil {
		out.Warnings = append(out.Warnings, "the latest payload cannot be rendered: "+in.RenderErr.Error())
	}
	rp, np := in.Payloads[out.Running], planned(d, out.NewNode)
	lp := in.Latest
	if rp == nil {
		return nil, fmt.Errorf("the payload the nodes of %s run (%s) is not stored any more: nothing to compare with", poolRef(pool), payload.Short(out.Running))
	}
	other := np
	if against == AgainstLatest {
		other = lp
	}
	for _, comp := range inputs.Components() {
		cd := ComponentDiff{Component: comp.Name(), Class: string(comp.Class()), Delivery: string(comp.Delivery()), Running: rp.Manifest[comp]}
		if np != nil {
			cd.NewNode = np.Manifest[comp]
		}
		if lp != nil {
			cd.Latest = lp.Manifest[comp]
		}
		if other != nil && other.Manifest[comp] != rp.Manifest[comp] {
			from, to := fragmentLines(comp, rp.Fragments[comp]), fragmentLines(comp, other.Fragments[comp])
			text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: withNewlines(from), B: withNewlines(to),
				FromFile: fmt.Sprintf("%s (running, payload %s)", comp.Name(), payload.Short(rp.Hash)),
				ToFile:   fmt.Sprintf("%s (%s, payload %s)", comp.Name(), against, payload.Short(other.Hash)),
				Context:  2,
			})
			if err != nil {
				return nil, err
			}
			cd.Diff = text
		}
		out.Components = append(out.Components, cd)
	}
	return out, nil
}

// planned is the payload hash, stored or one the plan stores.
func planned(d *decision, hash string) *payload.Payload {
	if p, ok := d.In.Payloads[hash]; ok {
		return p
	}
	for _, p := range d.Plan.Payloads {
		if p.Hash == hash {
			return p
		}
	}
	return nil
}

func withNewlines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l + "\n"
	}
	return out
}

func printDiff(w, errOut io.Writer, d *PayloadDiff) error {
	for _, warn := range d.Warnings {
		fmt.Fprintln(errOut, "Warning:", warn)
	}
	var nodes []string
	for _, n := range d.Nodes {
		nodes = append(nodes, fmt.Sprintf("%d on %s", n.Count, n.Payload))
	}
	fmt.Fprintf(w, "Pool %s/%s: nodes run payload %s", d.Namespace, d.Pool, payload.Short(d.Running))
	if len(nodes) > 0 {
		fmt.Fprintf(w, " (nodes: %s)", strings.Join(nodes, ", "))
	}
	fmt.Fprintf(w, "; a new node would boot %s; the latest payload is %s.\n\n", or(payload.Short(d.NewNode), "<unknown>"), or(payload.Short(d.Latest), "<not renderable>"))
	t := &table{header: []string{"COMPONENT", "CLASS", "DELIVERY", "RUNNING", "NEW-NODE", "LATEST"}}
	same := func(v, running string) string {
		switch v {
		case "":
			return "-"
		case running:
			return "="
		}
		return shortDigest(v)
	}
	differ := false
	for _, c := range d.Components {
		t.add(c.Component, c.Class, or(c.Delivery, "-"), shortDigest(c.Running), same(c.NewNode, c.Running), same(c.Latest, c.Running))
		differ = differ || c.Diff != ""
	}
	if err := t.print(w); err != nil {
		return err
	}
	if !differ {
		what := "a new node boots what the nodes run"
		if d.Against == AgainstLatest {
			what = "the nodes run the latest payload"
		}
		_, err := fmt.Fprintf(w, "\nNo difference: %s.\n", what)
		return err
	}
	for _, c := range d.Components {
		if c.Diff != "" {
			fmt.Fprintln(w)
			fmt.Fprint(w, c.Diff)
		}
	}
	return nil
}
