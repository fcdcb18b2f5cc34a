package inputs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Assembly builds a pool's Inputs from the objects the gather package
// reads: it validates and normalises each one and collects the pool's
// problems, so that one reconcile reports them all. It does no I/O; a
// missing object is reported to it by name.
type Assembly struct {
	pool types.NamespacedName
	in   *Inputs
	errs []error
}

// NewAssembly starts a pool's inputs from its spec and the controller
// settings. An error means the settings are wrong (the controller is
// misconfigured); a problem of the pool's spec is collected.
func NewAssembly(pool *nodepoolv1.NodePool, s Settings) (*Assembly, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("controller settings: %w", err)
	}
	a := &Assembly{pool: types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}}
	a.in = &Inputs{
		Pool:            a.pool,
		PayloadServer:   PayloadServerInput{URL: s.PayloadServerURL, CA: slices.Clone(s.PayloadServerCA)},
		RendererVersion: s.RendererVersion,
	}
	if err := specInputs(&pool.Spec, a.in); err != nil {
		a.fail(invalid("NodePool", a.pool, err))
	}
	return a, nil
}

// Pool is the pool's namespaced name.
func (a *Assembly) Pool() types.NamespacedName { return a.pool }

func (a *Assembly) fail(err *ConfigError) { a.errs = append(a.errs, err) }

// Missing records that an object of the pool's namespace the pool refers
// to does not exist; hint says what to do.
func (a *Assembly) Missing(kind, name, hint string) {
	a.fail(notFound(kind, types.NamespacedName{Namespace: a.pool.Namespace, Name: name}, "not found: %s", hint))
}

// UserConfig reads one user config ConfigMap of spec.config. ok is false
// when it is refused (recorded).
func (a *Assembly) UserConfig(cm *corev1.ConfigMap) (docs ConfigMapDocuments, ok bool) {
	key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
	a.in.Sources = append(a.in.Sources, Source{Kind: "ConfigMap", Name: cm.Name, Digest: dataDigest(cm.Data, cm.BinaryData)})
	data, has := cm.Data[ConfigKey]
	if !has {
		a.fail(invalid("ConfigMap", key, fmt.Errorf("has no key %q: put the Ignition configs or MachineConfigs there", ConfigKey)))
		return ConfigMapDocuments{}, false
	}
	parsed, err := ParseConfig([]byte(data))
	if err != nil {
		a.fail(invalid("ConfigMap", key, fmt.Errorf("key %q: %w", ConfigKey, err)))
		return ConfigMapDocuments{}, false
	}
	return ConfigMapDocuments{ConfigMap: cm.Name, Documents: parsed}, true
}

// UserConfigs merges the user configs of every ConfigMap of spec.config,
// in order. A conflict is recorded; any other error is returned.
func (a *Assembly) UserConfigs(sets []ConfigMapDocuments) error {
	set, err := MergeUserConfigs(a.pool.Namespace, sets)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			a.fail(ce)
			return nil
		}
		return err
	}
	a.in.UserConfigs = set
	return nil
}

// PullSecret reads the Secret of spec.pullSecretRef.
func (a *Assembly) PullSecret(s *corev1.Secret) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	a.in.Sources = append(a.in.Sources, Source{Kind: "Secret", Name: s.Name, Digest: dataDigest(nil, s.Data)})
	data, has := s.Data[PullSecretKey]
	if !has {
		a.fail(invalid("Secret", key, fmt.Errorf("has no key %q: make it a kubernetes.io/dockerconfigjson Secret (kubectl create secret docker-registry)", PullSecretKey)))
		return
	}
	var cfg struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Auths == nil {
		a.fail(invalid("Secret", key, fmt.Errorf("key %q is not a docker config JSON with an \"auths\" object: recreate it with kubectl create secret docker-registry", PullSecretKey)))
		return
	}
	a.in.PullSecret = SecretBytes(slices.Clone(data))
}

// TrustBundle reads the ConfigMap of spec.additionalTrustBundleRef.
func (a *Assembly) TrustBundle(cm *corev1.ConfigMap) {
	key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
	a.in.Sources = append(a.in.Sources, Source{Kind: "ConfigMap", Name: cm.Name, Digest: dataDigest(cm.Data, cm.BinaryData)})
	data, has := cm.Data[TrustBundleKey]
	if !has {
		a.fail(invalid("ConfigMap", key, fmt.Errorf("has no key %q: put the PEM certificates there", TrustBundleKey)))
		return
	}
	if err := validatePEMCertificates([]byte(data)); err != nil {
		a.fail(invalid("ConfigMap", key, fmt.Errorf("key %q: %w", TrustBundleKey, err)))
		return
	}
	a.in.TrustBundle = data
}

// ClusterMissing records that the pool's CAPI Cluster does not exist.
func (a *Assembly) ClusterMissing(key types.NamespacedName) {
	a.fail(&ConfigError{Reason: nodepoolv1.ReasonClusterNotFound, Kind: "Cluster", Object: key,
		Err: errors.New("not found: create the Cluster API Cluster in the pool's namespace; spec.clusterName cannot change, so recreate the pool to use another")})
}

// Cluster reads the pool's CAPI Cluster: its networks and control-plane
// endpoint.
func (a *Assembly) Cluster(cluster *clusterv1.Cluster) {
	key := types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name}
	network := cluster.Spec.ClusterNetwork
	var errs []error
	for field, cidrs := range map[string][]string{"spec.clusterNetwork.pods.cidrBlocks": network.Pods.CIDRBlocks, "spec.clusterNetwork.services.cidrBlocks": network.Services.CIDRBlocks} {
		for i, c := range cidrs {
			if _, _, err := net.ParseCIDR(c); err != nil {
				errs = append(errs, fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is not a CIDR such as 10.128.0.0/14", c))
			}
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		a.fail(invalid("Cluster", key, joinErrors(errs)))
		return
	}
	ep := cluster.Spec.ControlPlaneEndpoint
	if ep.Host == "" {
		a.fail(&ConfigError{Reason: ReasonClusterNotReady, Kind: "Cluster", Object: key,
			Err: errors.New("has no spec.controlPlaneEndpoint.host yet: nodes could not reach the API server; waiting for the control plane provider to set it")})
		return
	}
	if err := validateHost(ep.Host); err != nil {
		a.fail(invalid("Cluster", key, &FieldError{Field: "spec.controlPlaneEndpoint.host", Err: err}))
		return
	}
	port := ep.Port
	if port == 0 {
		port = 6443
	}
	domain := network.ServiceDomain
	if domain == "" {
		domain = "cluster.local"
	}
	a.in.Cluster = ClusterInput{
		PodCIDRs:      normalizeList(network.Pods.CIDRBlocks),
		ServiceCIDRs:  normalizeList(network.Services.CIDRBlocks),
		ServiceDomain: domain,
		Endpoint:      Endpoint{Host: ep.Host, Port: port},
	}
}

// ManagementConfigMissing records that the management config ConfigMap
// does not exist.
func (a *Assembly) ManagementConfigMissing(key types.NamespacedName) {
	a.fail(notFound("ConfigMap", key, "not found: the platform's management config is missing; create it with at least apiServerProxyImage in key %q, or start the controller with the right management config name", ManagementConfigKey))
}

// ManagementConfig reads the management config ConfigMap.
func (a *Assembly) ManagementConfig(cm *corev1.ConfigMap) {
	key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
	mc, err := ParseManagementConfig([]byte(cm.Data[ManagementConfigKey]))
	if err != nil {
		a.fail(invalid("ConfigMap", key, fmt.Errorf("management config key %q: %w", ManagementConfigKey, err)))
		return
	}
	a.in.Management = mc
}

// Done returns the pool's inputs, or every problem recorded (joined
// *ConfigError).
func (a *Assembly) Done() (*Inputs, error) {
	if len(a.errs) > 0 {
		return nil, joinErrors(a.errs)
	}
	slices.SortFunc(a.in.Sources, func(a, b Source) int {
		return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name)
	})
	return a.in, nil
}

// dataDigest is "sha256:<hex>" over an object's data as canonical JSON.
func dataDigest(data map[string]string, binary map[string][]byte) string {
	b, _ := json.Marshal(struct {
		Data       map[string]string `json:"data,omitempty"`
		BinaryData map[string][]byte `json:"binaryData,omitempty"`
	}{data, binary})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
