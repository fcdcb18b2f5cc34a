package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// Every simulated Node of every cluster lives on one API server, so a
// machine's identity includes its namespace.

// providerID is sim://<namespace>/<name>.
func providerID(sm *simv1.SimMachine) string {
	return simv1.ProviderIDPrefix + sm.Namespace + "/" + sm.Name
}

// nodeName is <name>.<namespace>: a DNS subdomain like a real hostname, and
// unambiguous because a namespace has no dot. A name too long for a Node is
// cut and tagged with a hash of the whole.
func nodeName(sm *simv1.SimMachine) string {
	name := sm.Name + "." + sm.Namespace
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tag := "-" + hex.EncodeToString(sum[:])[:10]
	suffix := "." + sm.Namespace
	return strings.TrimRight(sm.Name[:validation.DNS1123SubdomainMaxLength-len(suffix)-len(tag)], "-.") + tag + suffix
}

// hostname is the machine's name, as a kubelet reports it, cut to 63
// characters so it fits the kubernetes.io/hostname label.
func hostname(sm *simv1.SimMachine) string {
	if len(sm.Name) <= validation.DNS1123LabelMaxLength {
		return sm.Name
	}
	sum := sha256.Sum256([]byte(sm.Name))
	tag := "-" + hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(sm.Name[:validation.DNS1123LabelMaxLength-len(tag)], "-.") + tag
}

// internalIP is a stable address in 10.0.0.0/8 derived from the machine's
// UID, never a network or broadcast address of a /24.
func internalIP(sm *simv1.SimMachine) string {
	h := fnv.New32a()
	h.Write([]byte(sm.UID))
	v := h.Sum32()
	return fmt.Sprintf("10.%d.%d.%d", (v>>16)&0xff, (v>>8)&0xff, 1+(v&0xff)%254)
}

// addresses are what the machine reports to Cluster API and on its Node.
func addresses(sm *simv1.SimMachine) clusterv1.MachineAddresses {
	return clusterv1.MachineAddresses{
		{Type: clusterv1.MachineInternalIP, Address: internalIP(sm)},
		{Type: clusterv1.MachineHostName, Address: hostname(sm)},
	}
}
