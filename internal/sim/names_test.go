package sim

import (
	"net"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

func TestMachineIdentity(t *testing.T) {
	long := strings.Repeat("a", 240) + "-x"
	tests := []struct {
		name, namespace string
		wantNode        string
	}{
		{name: "workers-abc-1", namespace: "team-a", wantNode: "workers-abc-1.team-a"},
		{name: "a.b", namespace: "c", wantNode: "a.b.c"},
		{name: long, namespace: "team-a"},
		{name: strings.Repeat("b", 50) + "." + strings.Repeat("c", 220), namespace: "team-a"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		sm := &simv1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Namespace: tt.namespace, UID: types.UID("uid-" + tt.name)}}
		node := nodeName(sm)
		if tt.wantNode != "" && node != tt.wantNode {
			t.Errorf("nodeName(%s/%s) = %q, want %q", tt.namespace, tt.name, node, tt.wantNode)
		}
		if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 || !strings.HasSuffix(node, "."+tt.namespace) {
			t.Errorf("nodeName(%s/%s) = %q: not a Node name ending in the namespace: %v", tt.namespace, tt.name, node, errs)
		}
		if h := hostname(sm); len(validation.IsDNS1123Subdomain(h)) > 0 || len(validation.IsValidLabelValue(h)) > 0 {
			t.Errorf("hostname(%s) = %q is not a host name and label value", tt.name, h)
		}
		if got := providerID(sm); got != "sim://"+tt.namespace+"/"+tt.name {
			t.Errorf("providerID = %q", got)
		}
		ip := net.ParseIP(internalIP(sm)).To4()
		if ip == nil || ip[0] != 10 || ip[3] == 0 || ip[3] == 255 || internalIP(sm) != internalIP(sm.DeepCopy()) {
			t.Errorf("internalIP = %q, want a stable host address in 10.0.0.0/8", internalIP(sm))
		}
		if seen[node] {
			t.Errorf("node name %q given twice", node)
		}
		seen[node] = true
	}
}
