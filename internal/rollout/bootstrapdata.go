package rollout

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// restoreUserData rebuilds, from its token Secret and the pool's
// annotations, a user-data Secret that the MachineDeployment or its
// machines reference and that is gone (deleted by hand before it carried
// the in-use finalizer, or with the finalizer removed). Its name encodes
// the rollout hash, its token records the rollout hash and the payload it
// serves, and the pool's annotations mirror what the machines run: so a
// deleted Secret never changes a decision. The returned input holds the
// rebuilt user-data; the plan re-creates it.
func restoreUserData(in Input, p *Plan) Input {
	md := in.MachineDeployment
	if md == nil {
		return in
	}
	var restored map[string]UserData
	for _, name := range []string{md.DataSecretName, md.RunningDataSecretName} {
		if name == "" {
			continue
		}
		if _, ok := in.UserData[name]; ok {
			continue
		}
		if _, ok := restored[name]; ok {
			continue
		}
		tok, ok := tokenOfUserData(in, name)
		if !ok {
			continue
		}
		running := name == md.RunningDataSecretName || md.Complete
		ud := UserData{Name: name, RolloutHash: tok.RolloutHash, PayloadHash: tok.PayloadHash, Created: in.Now}
		if name == md.DataSecretName {
			ud.Version, ud.TemplateName = md.Version, md.TemplateName
		} else {
			ud.Version = in.Pool.Status.Version
		}
		if running {
			ud.RolloutWithoutVersion = annotation(in.Pool, nodepoolv1.AnnotationCurrentRolloutConfig)
			if pinned := annotation(in.Pool, nodepoolv1.AnnotationCurrentPayload); pinned != "" {
				ud.PayloadHash = pinned
			}
		}
		if restored == nil {
			restored = map[string]UserData{}
		}
		restored[name] = ud
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventUserDataRestored,
			Message: fmt.Sprintf("user-data Secret %s, which machines of the pool use, was missing: rebuilt from token Secret %s and the pool's annotations; nothing rolls", name, tok.Name)})
	}
	if restored == nil {
		return in
	}
	all := make(map[string]UserData, len(in.UserData)+len(restored))
	for k, v := range in.UserData {
		all[k] = v
	}
	for k, v := range restored {
		all[k] = v
	}
	in.UserData = all
	return in
}

// tokenOfUserData finds the token Secret of a user-data Secret by name.
func tokenOfUserData(in Input, userData string) (Token, bool) {
	for _, name := range sortedKeys(in.Tokens) {
		t := in.Tokens[name]
		if t.RolloutHash != "" && secrets.UserDataSecretName(in.Pool.Name, t.RolloutHash) == userData {
			return t, true
		}
	}
	return Token{}, false
}

// planBootstrapData reports whether what the machines boot from is intact:
// the user-data the MachineDeployment references exists, and no Secret the
// pool depends on is being deleted.
func planBootstrapData(in Input, p *Plan) {
	c := metav1.Condition{Type: nodepoolv1.ConditionBootstrapDataAvailable, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	if md := in.MachineDeployment; md != nil && md.DataSecretName != "" {
		if _, ok := in.UserData[md.DataSecretName]; !ok {
			if _, ok := tokenOfUserData(in, md.DataSecretName); !ok {
				c.Status, c.Reason = metav1.ConditionFalse, nodepoolv1.ReasonUserDataMissing
				c.Message = fmt.Sprintf("user-data Secret %s, which the MachineDeployment references, and its token are gone: new machines cannot boot and nothing rolls until a rollout makes new ones (change the spec, or restore the Secret)", md.DataSecretName)
				p.Conditions = append(p.Conditions, c)
				return
			}
		}
	}
	if len(in.DeletedInUse) > 0 {
		names := append([]string(nil), in.DeletedInUse...)
		sort.Strings(names)
		c.Reason = nodepoolv1.ReasonSecretInUse
		c.Message = fmt.Sprintf("Secrets deleted while machines still depend on them are kept until nothing references them: %s", strings.Join(names, ", "))
	}
	p.Conditions = append(p.Conditions, c)
}

// repointMissingPayloads moves a token that serves a payload no Secret
// holds any more (removed by hand despite its in-use finalizer) to the
// latest payload: new machines would otherwise get no payload at all.
func repointMissingPayloads(in Input, p *Plan) {
	if in.Latest == nil {
		return
	}
	planned := map[string]bool{}
	for _, pl := range p.Payloads {
		planned[pl.Hash] = true
	}
	for i := range p.Tokens {
		t := &p.Tokens[i]
		if _, ok := in.Payloads[t.PayloadHash]; ok || planned[t.PayloadHash] || t.PayloadHash == "" {
			continue
		}
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventPayloadMissing,
			Message: fmt.Sprintf("payload %s, which token Secret %s serves, is gone: new machines get the latest payload %s instead", payload.Short(t.PayloadHash), t.Name, payload.Short(in.Latest.Hash))})
		t.PayloadHash = in.Latest.Hash
		store(in, in.Latest, p)
		planned[in.Latest.Hash] = true
	}
}
