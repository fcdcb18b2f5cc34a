package rollout

import (
	"regexp"
	"strings"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// budgetName finds the PodDisruptionBudget in the API server's refusal of
// an eviction ("The disruption budget web needs 2 healthy pods and has 2
// currently").
var budgetName = regexp.MustCompile(`disruption budget (\S+) (needs|is still being processed)`)

// DrainBlockers reads the pods that hold a drain, and why, from what the
// drain reports: Cluster API's Machine Deleting condition
//
//	Drain not completed yet (started at 2026-12-03T10:00:00Z):
//	* Pod ns/web-1: cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently
//	* Pods ns/a, ns/b: deletionTimestamp set, but still not removed from the Node
//
// (a list of more than three pods ends with "... (N more)", which is
// dropped), or an InPlace drain's refused evictions ("eviction of pod ns/a
// refused: <the API server's reason>", joined by "; ").
func DrainBlockers(message string) []nodepoolv1.DrainBlocker {
	var out []nodepoolv1.DrainBlocker
	add := func(pods, why string) {
		budget := ""
		if m := budgetName.FindStringSubmatch(why); m != nil {
			budget = m[1]
		}
		why = strings.TrimSpace(why)
		if strings.Contains(why, "deletionTimestamp set") {
			why = "terminating: its termination grace period has not ended"
		} else if budget != "" {
			why = "its eviction is refused: " + why[strings.Index(why, budgetName.FindString(why)):]
		}
		for _, pod := range strings.Split(pods, ", ") {
			pod = strings.TrimSpace(pod)
			if pod == "" || strings.HasPrefix(pod, "...") {
				continue
			}
			out = append(out, nodepoolv1.DrainBlocker{Pod: pod, Budget: budget, Reason: truncate(why, 512)})
		}
	}
	for _, line := range strings.Split(message, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "* Pods ")
		if !ok {
			rest, ok = strings.CutPrefix(line, "* Pod ")
		}
		if ok {
			if pods, why, ok := strings.Cut(rest, ": "); ok {
				add(pods, why)
			}
			continue
		}
		for _, part := range strings.Split(line, "; ") {
			rest, ok := strings.CutPrefix(part, "eviction of pod ")
			if !ok {
				continue
			}
			for _, sep := range []string{" refused: ", " failed: "} {
				if pod, why, ok := strings.Cut(rest, sep); ok {
					add(pod, why)
					break
				}
			}
		}
	}
	return out
}
