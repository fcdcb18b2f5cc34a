package devenv

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// edgePool names the demo's InPlace pool.
func (d *demo) edgePool() string { return d.o.Pool + "-edge" }

// inPlace creates an InPlace pool of 2 with its own config, changes the
// config and shows the same machines updated where they run, one node at
// a time.
func (d *demo) inPlace(ctx context.Context) error {
	key := client.ObjectKey{Namespace: d.o.Namespace, Name: d.edgePool()}
	config := key.Name + "-chrony"
	d.begin("An InPlace pool: the same decision, applied without replacing machines",
		fmt.Sprintf("NodePool %s: replicas 2, upgradeType InPlace, inPlace.maxUnavailable 1, config [%s]", key.Name, config),
		fmt.Sprintf("then ConfigMap %s: server time.example.com → ntp.example.com", config))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: config}}
	if err := d.setConfig(ctx, cm, "time.example.com"); err != nil {
		return err
	}
	pool := d.newPool(key.Name, config, d.o.Template, 2, nodepoolv1.Management{UpgradeType: nodepoolv1.UpgradeTypeInPlace})
	if err := d.c.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating the InPlace NodePool: %w", err)
	}
	before, err := d.waitForPool(ctx, key, "2 ready nodes on one payload", func(s poolState, err error) bool {
		return err == nil && s.settled(2)
	})
	if err != nil {
		return err
	}
	d.say("%d machines on %s; now the owner changes the config.", len(before.machines), before.onlyPayload())
	if err := d.setConfig(ctx, cm, "ntp.example.com"); err != nil {
		return err
	}
	start, last := time.Now(), ""
	s, err := d.waitForPool(ctx, key, "every node updated in place", func(s poolState, err error) bool {
		if err != nil {
			return false
		}
		var nodes []string
		for _, m := range s.machines {
			what := m.payload
			if m.phase != "" {
				what = strings.ToLower(m.phase)
			}
			if m.cordoned {
				what += " (cordoned)"
			}
			nodes = append(nodes, fmt.Sprintf("%s %s", m.node, what))
		}
		line := fmt.Sprintf("same machines %d/%d  %s", s.countIn(before.uids()), len(before.machines), strings.Join(nodes, ", "))
		if line != last {
			d.say("%6.1fs  %s", time.Since(start).Seconds(), line)
			last = line
		}
		return s.countIn(before.uids()) == len(before.machines) && s.settled(2) && s.onlyPayload() != before.onlyPayload()
	})
	if err != nil {
		return err
	}
	d.say("done in %s: the same %d machines, every node on %s. Each was cordoned, drained through the", time.Since(start).Round(time.Second), len(s.machines), s.onlyPayload())
	d.say("Eviction API, updated by its node agent (the sim) and uncordoned, one at a time; see README, node update protocol.")
	return nil
}
