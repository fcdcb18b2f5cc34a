package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/settings"
)

// What a user needs, command by command (docs/operations.md, RBAC for
// users). Following a pool (rollout status, history, fleet) needs only
// what the ClusterRole nodepool-view grants in the pool's namespace, and
// Kubernetes' view (ControllerRevisions): the plugin reads what the
// controller publishes on the pool (status.rollout, conditions, history
// records). Working out what the controller would do now (diff, plan, and
// status's prediction) observes the pool as the controller does and
// renders its payload: that reads the controller's settings in its
// namespace, the pool's Secrets (tokens and payloads) and referenced
// Secrets, and its Cluster API objects. Before reading any of these, the
// plugin asks the API server (SelfSubjectAccessReview) whether the user
// may; if not, it reads nothing more and says which permission is missing.

// permission is one read of the controller's prediction.
type permission struct {
	verb, group, resource, namespace, name string
}

func (p permission) String() string {
	r := p.resource
	if p.group != "" {
		r += "." + p.group
	}
	s := p.verb + " " + r
	if p.name != "" {
		s += " " + p.name
	}
	return s + " in namespace " + p.namespace
}

// predictionNeeds are the reads of decide for a pool in namespace ns.
func (o *Options) predictionNeeds(ns string) []permission {
	cns := o.ControllerNamespace
	if cns == "" {
		cns = settings.DefaultNamespace
	}
	return []permission{
		{"get", "", "configmaps", cns, settings.ConfigMapName},
		{"list", "", "secrets", ns, ""},
		{"get", "", "secrets", ns, ""},
		{"list", "cluster.x-k8s.io", "machinedeployments", ns, ""},
		{"list", "cluster.x-k8s.io", "machinesets", ns, ""},
		{"list", "cluster.x-k8s.io", "machines", ns, ""},
	}
}

// missingForPrediction lists what the user may not read of what a
// prediction for a pool of namespace ns reads, asking the API server once
// per namespace. Nothing is missing when it cannot be asked (a client made
// by a test).
func (o *Options) missingForPrediction(ctx context.Context, ns string) ([]permission, error) {
	if o.ConfigFlags == nil {
		return nil, nil
	}
	if missing, ok := o.missing[ns]; ok {
		return missing, nil
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var missing []permission
	for _, p := range o.predictionNeeds(ns) {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: p.verb, Group: p.group, Resource: p.resource, Namespace: p.namespace, Name: p.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking the API server whether you may %s: %w", p, err)
		}
		if !r.Status.Allowed {
			missing = append(missing, p)
		}
	}
	if o.missing == nil {
		o.missing = map[string][]permission{}
	}
	o.missing[ns] = missing
	return missing, nil
}

// missingWords says what is missing, for a message.
func missingWords(missing []permission) string {
	words := make([]string, len(missing))
	for i, p := range missing {
		words[i] = p.String()
	}
	return strings.Join(words, ", ")
}

// publishedPlan is the controller's last decision as the pool's status
// carries it (status.rollout, status.desiredReplicas): what a user who may
// not read the controller's inputs is shown.
func publishedPlan(pool *nodepoolv1.NodePool) rollout.Plan {
	d := rollout.Decision{Replicas: pool.Status.DesiredReplicas, Standing: rollout.StandingOf(pool.Status.Rollout)}
	return rollout.Plan{Decision: d}
}

// limitedError is a command's answer when it cannot show what it shows
// without permissions the user lacks: printed as the command's output,
// not a failure.
type limitedError struct{ msg string }

func (e *limitedError) Error() string { return e.msg }

// asAnswer prints a limitedError as the command's answer and returns nil;
// any other error is returned as it is.
func (o *Options) asAnswer(err error) error {
	var lim *limitedError
	if errors.As(err, &lim) {
		fmt.Fprintln(o.out(), lim.msg)
		return nil
	}
	return err
}

// publishedWords says where the pool stands as the controller published
// it.
func publishedWords(pool *nodepoolv1.NodePool) string {
	r := pool.Status.Rollout
	if r == nil {
		return "the controller has published no status.rollout yet"
	}
	s := fmt.Sprintf("the controller last published phase %s", r.Phase)
	if r.Message != "" {
		s += ": " + r.Message
	}
	if r.Boots != "" {
		s += "; a new machine boots payload " + shortDigest(r.Boots)
	}
	return s
}

// maySettings reports whether the user may read the controller's settings
// ConfigMap (asked, not tried: a user without it reads nothing there).
func (o *Options) maySettings(ctx context.Context) bool {
	if o.ConfigFlags == nil {
		return true // a client made by a test
	}
	ns := ""
	if !o.AllNamespaces {
		if n, err := o.namespace(); err == nil {
			ns = n
		}
	}
	missing, err := o.missingForPrediction(ctx, ns)
	if err != nil {
		return false
	}
	for _, p := range missing {
		if p.resource == "configmaps" {
			return false
		}
	}
	return true
}
