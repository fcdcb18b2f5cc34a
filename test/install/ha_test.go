package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/stack"
)

// acquired is what client-go's leader election logs when a replica becomes
// the leader.
const acquired = "Successfully acquired lease"

// TestControllerFailoverMidRollout runs the shipped two controller replicas
// with leader election (the shipped lease flags' defaults: 15s lease, 10s
// renew deadline, 2s retry), SIGKILLs the leader while a rollout replaces
// machines, and checks that the other replica takes over, finishes the
// rollout, writes no duplicate revision and replaces each old machine
// exactly once.
func TestControllerFailoverMidRollout(t *testing.T) {
	controllers := startDeployment(t, controllerName)
	startDeployment(t, payloadName)
	if len(controllers) < 2 {
		t.Fatalf("the controller Deployment ships %d replicas; failover needs 2", len(controllers))
	}
	leader := waitLeader(t, controllers, nil)

	// Machines take a few seconds to boot, so the rollout of 3 outlasts the
	// leader's lease.
	p := newPool(t, 3, 6*time.Second)
	machines := recordMachines(t, p.Namespace)
	s := waitFor(t, p, "3 ready nodes", settled(3))
	old, before := s.machines, revisions(t, p)

	stack.SetChrony(t, env.Client, p.Namespace, "time2.corp.example")
	waitFor(t, p, "the rollout to create its first machine", func(s state) bool {
		created, _ := machines.seen()
		return created.Difference(old).Len() > 0
	})
	holder := leaseHolder(t)
	leader.kill()
	killed := time.Now()
	if s := observe(t, p); settled(3)(s) && !s.machines.HasAny(sets.List(old)...) {
		t.Fatal("the rollout ended before the leader was killed; slow the machines down")
	}
	next := waitLeader(t, controllers, leader)
	t.Logf("%s took over %s after %s was killed (lease held by %q before)", next.Name, time.Since(killed).Round(time.Second), leader.Name, holder)
	if s := observe(t, p); !settled(3)(s) || s.machines.HasAny(sets.List(old)...) {
		t.Logf("at the takeover the rollout is still under way: %s", s)
	}
	if h := leaseHolder(t); h == holder {
		t.Errorf("the Lease is still held by %q", h)
	}

	s = waitFor(t, p, "every machine replaced, on a new payload", func(s state) bool {
		return settled(3)(s) && !s.machines.HasAny(sets.List(old)...)
	})
	stack.WaitFor(t, timeout, "the rollout recorded complete", func() state { checkReplicas(t); return observe(t, p) },
		func(s state) bool { return lastOutcome(t, p) == history.OutcomeComplete }, state.String)

	// Each old machine replaced exactly once: 3 new machines, no more, all
	// old ones deleted.
	created, deleted := machines.seen()
	if fresh := created.Difference(old); fresh.Len() != 3 || !fresh.Equal(s.machines) {
		t.Errorf("the rollout created %d machines (%d remain), want exactly the 3 that remain", fresh.Len(), s.machines.Len())
	}
	if !deleted.IsSuperset(old) || deleted.Len() != old.Len() {
		t.Errorf("%d machines deleted, want the %d old ones", deleted.Len(), old.Len())
	}
	// One revision for the rollout, recorded once.
	after := revisions(t, p)
	if len(after) != len(before)+1 {
		t.Errorf("%d revisions before the rollout and %d after, want one more", len(before), len(after))
	}
	hashes := map[string]int{}
	for i := range after {
		e, err := history.Decode(&after[i])
		if err != nil {
			t.Fatal(err)
		}
		hashes[e.RolloutHash]++
		if hashes[e.RolloutHash] > 1 {
			t.Errorf("rollout %s is recorded %d times", e.RolloutHash, hashes[e.RolloutHash])
		}
	}
}

// TestPayloadServerFailover runs the shipped two payload server replicas
// behind the stand-in Service, checks that both serve, SIGKILLs one and
// scales the pool up: the new machines boot from the survivor.
func TestPayloadServerFailover(t *testing.T) {
	startDeployment(t, controllerName)
	servers := startDeployment(t, payloadName)
	if len(servers) < 2 {
		t.Fatalf("the payload server Deployment ships %d replicas; failover needs 2", len(servers))
	}
	p := newPool(t, 2, 0)
	s := waitFor(t, p, "2 ready nodes that fetched their payload", func(s state) bool {
		return settled(2)(s) && meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionReachedIgnitionEndpoint)
	})
	token := poolToken(t, p)
	for _, r := range servers {
		if code := fetch(t, r.Addrs["https"], token); code != http.StatusOK {
			t.Fatalf("%s answered %d to the pool's token, want 200", r.Name, code)
		}
	}

	servers[0].kill()
	before := s.machines
	scale(t, p, 4)
	waitFor(t, p, "4 ready nodes, the 2 first kept", func(s state) bool {
		return settled(4)(s) && s.machines.IsSuperset(before)
	})
	if code := fetch(t, servers[1].Addrs["https"], token); code != http.StatusOK {
		t.Errorf("the surviving %s answered %d, want 200", servers[1].Name, code)
	}
}

// waitLeader waits until a replica other than not logs that it leads, and
// returns it.
func waitLeader(t *testing.T, rs []*replica, not *replica) *replica {
	t.Helper()
	return stack.WaitFor(t, timeout, "a replica to lead", func() *replica {
		checkReplicas(t)
		for _, r := range rs {
			if r != not && r.Log.Find(acquired) != "" {
				return r
			}
		}
		return nil
	}, func(r *replica) bool { return r != nil }, func(*replica) string { return "no replica leads" })
}

func leaseHolder(t *testing.T) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: leaderElectionID}, l); err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// lastOutcome is the outcome of the pool's latest revision.
func lastOutcome(t *testing.T, p *nodepoolv1.NodePool) string {
	t.Helper()
	revs := revisions(t, p)
	history.Sort(revs)
	if len(revs) == 0 {
		return ""
	}
	return revs[len(revs)-1].Annotations[history.AnnotationOutcome]
}

// poolToken is the current token of one of the pool's token Secrets.
func poolToken(t *testing.T, p *nodepoolv1.NodePool) string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(p.Namespace),
		client.MatchingLabels{nodepoolv1.LabelPool: p.Name, secrets.LabelKind: secrets.KindToken}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatal("the pool has no token Secret")
	}
	return string(list.Items[0].Data[secrets.KeyToken])
}

// fetch GETs /ignition from one replica's HTTPS address with token, as a
// machine does through the Service (verifying the certificate for the
// Service's DNS name with the CA the controller hands out), and returns
// the status code.
func fetch(t *testing.T, addr, token string) int {
	t.Helper()
	svc, err := serviceAddress()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(svc)
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: tlsSecretName}, s); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.Data["ca.crt"])
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12},
	}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s/ignition", addr), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET /ignition from %s: %v", addr, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
