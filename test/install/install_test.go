package install

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/process"
	"nodepool.dev/nodepool/test/stack"
)

// startDeployment starts as many replicas of the shipped Deployment as it
// asks for; the payload server's become the Service's endpoints. A payload
// server is ready once the controller has mirrored every pool (the marker
// Secret nodepool-mirrors-ready): start the controller first, as a fresh
// install of both Deployments at once does.
func startDeployment(t *testing.T, name string) []*replica {
	t.Helper()
	d := deployment(t, name)
	var rs []*replica
	var https []string
	for i := range ptr.Deref(d.Spec.Replicas, 1) {
		r := startReplica(t, name, name+"-"+string(rune('a'+i)), runOptions{})
		rs = append(rs, r)
		https = append(https, r.Addrs["https"])
	}
	if name == payloadName {
		service.SetBackends(https...)
		t.Cleanup(func() { service.SetBackends() })
	}
	return rs
}

// TestShippedWiring checks what ties the shipped objects together: the
// controller's --payload-server-url names the payload server Service, the
// Service reaches the container's HTTPS port, and both Deployments mount
// the Secret the test creates.
func TestShippedWiring(t *testing.T) {
	c := deployment(t, controllerName).Spec.Template.Spec.Containers[0]
	raw, at := process.FlagValue(c.Args, "payload-server-url")
	if at < 0 {
		t.Fatal("the controller has no --payload-server-url")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := serviceAddress()
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Host != svc || u.Path != "/ignition" {
		t.Errorf("--payload-server-url %s is not https://%s/ignition (the payload server Service)", raw, svc)
	}
	d := deployment(t, payloadName)
	var service corev1.Service
	if err := shippedObject("Service", payloadName, &service); err != nil {
		t.Fatal(err)
	}
	target := service.Spec.Ports[0].TargetPort.String()
	named := false
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		named = named || (p.Name == target && p.Name == "https")
	}
	if !named {
		t.Errorf("the Service's targetPort %q is not the payload server's https container port", target)
	}
	for _, name := range []string{controllerName, payloadName} {
		for _, v := range deployment(t, name).Spec.Template.Spec.Volumes {
			if v.Secret == nil || v.Secret.SecretName != tlsSecretName {
				t.Errorf("deployment %s: volume %s is not Secret %s", name, v.Name, tlsSecretName)
			}
		}
	}
}

// TestShippedManifestsRunAPool runs both Deployments as shipped (their
// replica counts, args, env, ports and probes, their ServiceAccounts bound
// by the shipped RBAC) and a pool through its life: created, scaled,
// rolled by its owner, deleted. A replica that exits or is refused by RBAC,
// or a pool condition reporting a refusal, fails it.
func TestShippedManifestsRunAPool(t *testing.T) {
	startDeployment(t, controllerName)
	startDeployment(t, payloadName)

	p := newPool(t, 2, 0)
	s := waitFor(t, p, "2 ready nodes that fetched their payload", func(s state) bool {
		return settled(2)(s) && meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionReachedIgnitionEndpoint)
	})
	first := s.machines

	scale(t, p, 3)
	s = waitFor(t, p, "3 ready nodes, the first 2 kept", func(s state) bool {
		return settled(3)(s) && s.machines.IsSuperset(first)
	})
	before := s

	stack.SetChrony(t, env.Client, p.Namespace, "time2.corp.example")
	s = waitFor(t, p, "every machine replaced, on a new payload", func(s state) bool {
		return settled(3)(s) && s.payload() != before.payload() && !s.machines.HasAny(sets.List(before.machines)...)
	})
	if s.history <= before.history {
		t.Errorf("the rollout recorded no revision: %d before, %d after", before.history, s.history)
	}

	if err := env.Client.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	waitGone(t, p)
	checkReplicas(t)
}

// TestARejectedArgFails shows that the binary rejecting an arg fails these
// tests: the process exits, and the check every wait makes reports it.
func TestARejectedArgFails(t *testing.T) {
	r := startReplica(t, controllerName, "controller-bad-arg", runOptions{extraArgs: []string{"--no-such-flag"}, noWait: true})
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if done, _ := r.Exited(); done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	err := r.Problem()
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("a rejected arg: %v, want the exit reported", err)
	}
	r.MarkStopped()
}
