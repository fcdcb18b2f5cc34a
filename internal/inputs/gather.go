package inputs

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Keys of referenced objects.
const (
	// PullSecretKey is the key of a kubernetes.io/dockerconfigjson Secret.
	PullSecretKey = corev1.DockerConfigJsonKey
	// TrustBundleKey is the key of the trust bundle ConfigMap.
	TrustBundleKey = "ca-bundle.crt"
)

// Settings are the controller's own inputs to every payload.
type Settings struct {
	// ManagementConfig is the management config ConfigMap; zero means
	// DefaultManagementConfig.
	ManagementConfig types.NamespacedName
	// PayloadServerURL is the https URL of the payload server's /ignition.
	PayloadServerURL string
	// PayloadServerCA is the PEM bundle that signs the payload server's
	// certificate.
	PayloadServerCA []byte
	// RendererVersion is the nodepool build, such as v0.3.1 or a commit.
	RendererVersion string
}

// Validate checks the settings; an error means the controller is
// misconfigured, not a pool.
func (s Settings) Validate() error {
	u, err := url.Parse(s.PayloadServerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("payload server URL %q must be an https:// URL with a host: set it to where nodes reach the payload server", s.PayloadServerURL)
	}
	if err := validatePEMCertificates(s.PayloadServerCA); err != nil {
		return fmt.Errorf("payload server CA: %w", err)
	}
	if s.RendererVersion == "" {
		return errors.New("renderer version is empty: set it to the nodepool build version")
	}
	return nil
}

// Gather reads, validates and normalises every input of a pool's payload:
// the NodePool's spec, its user config ConfigMaps, pull secret and trust
// bundle, the CAPI Cluster, the management config, the infrastructure
// template, and the controller settings. Call it once per reconcile.
//
// A problem with the pool's inputs is returned as one or more *ConfigError
// (joined); use Reason(err) for the condition reason. Any other error is
// transient (the API server could not be read): retry.
func Gather(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, s Settings) (*Inputs, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("controller settings: %w", err)
	}
	s.ManagementConfig = s.ManagementConfigKey()
	g := &gatherer{c: c, pool: client.ObjectKeyFromObject(pool)}
	in := &Inputs{
		Pool:            g.pool,
		PayloadServer:   PayloadServerInput{URL: s.PayloadServerURL, CA: slices.Clone(s.PayloadServerCA)},
		RendererVersion: s.RendererVersion,
	}
	if err := specInputs(&pool.Spec, in); err != nil {
		g.fail(invalid("NodePool", g.pool, err))
	}
	steps := []func(context.Context, *nodepoolv1.NodePool, *Inputs) error{
		g.gatherUserConfigs,
		g.gatherPullSecret,
		g.gatherTrustBundle,
		g.gatherCluster,
		func(ctx context.Context, _ *nodepoolv1.NodePool, in *Inputs) error {
			return g.gatherManagementConfig(ctx, s.ManagementConfig, in)
		},
		func(ctx context.Context, pool *nodepoolv1.NodePool, in *Inputs) error {
			t, err := g.gatherTemplate(ctx, pool.Spec.InfrastructureTemplateRef)
			if t != nil {
				in.InfrastructureTemplate = *t
			}
			return err
		},
	}
	for _, step := range steps {
		if err := step(ctx, pool, in); err != nil {
			return nil, err
		}
	}
	if len(g.errs) > 0 {
		return nil, joinErrors(g.errs)
	}
	slices.SortFunc(in.Sources, func(a, b Source) int {
		return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name)
	})
	return in, nil
}

// gatherer reads a pool's objects, collecting the pool's problems so that
// one reconcile reports them all.
type gatherer struct {
	c    client.Reader
	pool types.NamespacedName
	errs []error
}

func (g *gatherer) fail(err *ConfigError) { g.errs = append(g.errs, err) }

// get reads an object of the pool's namespace. found is false when it does
// not exist (recorded with hint); err is a transient error.
func (g *gatherer) get(ctx context.Context, kind, name string, obj client.Object, hint string) (found bool, err error) {
	key := types.NamespacedName{Namespace: g.pool.Namespace, Name: name}
	if err := g.c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			g.fail(notFound(kind, key, "not found: %s", hint))
			return false, nil
		}
		return false, fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	return true, nil
}

func (g *gatherer) gatherUserConfigs(ctx context.Context, pool *nodepoolv1.NodePool, in *Inputs) error {
	var sets []ConfigMapDocuments
	ok := true
	for _, ref := range pool.Spec.Config {
		cm := &corev1.ConfigMap{}
		found, err := g.get(ctx, "ConfigMap", ref.Name, cm, "create it or remove it from spec.config")
		if err != nil {
			return err
		}
		if !found {
			ok = false
			continue
		}
		key := client.ObjectKeyFromObject(cm)
		in.Sources = append(in.Sources, Source{Kind: "ConfigMap", Name: ref.Name, Digest: dataDigest(cm.Data, cm.BinaryData)})
		data, has := cm.Data[ConfigKey]
		if !has {
			g.fail(invalid("ConfigMap", key, fmt.Errorf("has no key %q: put the Ignition configs or MachineConfigs there", ConfigKey)))
			ok = false
			continue
		}
		docs, err := ParseConfig([]byte(data))
		if err != nil {
			g.fail(invalid("ConfigMap", key, fmt.Errorf("key %q: %w", ConfigKey, err)))
			ok = false
			continue
		}
		sets = append(sets, ConfigMapDocuments{ConfigMap: ref.Name, Documents: docs})
	}
	if !ok {
		return nil
	}
	set, err := MergeUserConfigs(g.pool.Namespace, sets)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			g.fail(ce)
			return nil
		}
		return err
	}
	in.UserConfigs = set
	return nil
}

func (g *gatherer) gatherPullSecret(ctx context.Context, pool *nodepoolv1.NodePool, in *Inputs) error {
	if pool.Spec.PullSecretRef == nil {
		return nil
	}
	s := &corev1.Secret{}
	found, err := g.get(ctx, "Secret", pool.Spec.PullSecretRef.Name, s, "create it or fix spec.pullSecretRef")
	if err != nil || !found {
		return err
	}
	key := client.ObjectKeyFromObject(s)
	in.Sources = append(in.Sources, Source{Kind: "Secret", Name: s.Name, Digest: dataDigest(nil, s.Data)})
	data, has := s.Data[PullSecretKey]
	if !has {
		g.fail(invalid("Secret", key, fmt.Errorf("has no key %q: make it a kubernetes.io/dockerconfigjson Secret (kubectl create secret docker-registry)", PullSecretKey)))
		return nil
	}
	var cfg struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Auths == nil {
		g.fail(invalid("Secret", key, fmt.Errorf("key %q is not a docker config JSON with an \"auths\" object: recreate it with kubectl create secret docker-registry", PullSecretKey)))
		return nil
	}
	in.PullSecret = SecretBytes(slices.Clone(data))
	return nil
}

func (g *gatherer) gatherTrustBundle(ctx context.Context, pool *nodepoolv1.NodePool, in *Inputs) error {
	if pool.Spec.AdditionalTrustBundleRef == nil {
		return nil
	}
	cm := &corev1.ConfigMap{}
	found, err := g.get(ctx, "ConfigMap", pool.Spec.AdditionalTrustBundleRef.Name, cm, "create it or fix spec.additionalTrustBundleRef")
	if err != nil || !found {
		return err
	}
	key := client.ObjectKeyFromObject(cm)
	in.Sources = append(in.Sources, Source{Kind: "ConfigMap", Name: cm.Name, Digest: dataDigest(cm.Data, cm.BinaryData)})
	data, has := cm.Data[TrustBundleKey]
	if !has {
		g.fail(invalid("ConfigMap", key, fmt.Errorf("has no key %q: put the PEM certificates there", TrustBundleKey)))
		return nil
	}
	if err := validatePEMCertificates([]byte(data)); err != nil {
		g.fail(invalid("ConfigMap", key, fmt.Errorf("key %q: %w", TrustBundleKey, err)))
		return nil
	}
	in.TrustBundle = data
	return nil
}

func (g *gatherer) gatherCluster(ctx context.Context, pool *nodepoolv1.NodePool, in *Inputs) error {
	cluster := &clusterv1.Cluster{}
	key := types.NamespacedName{Namespace: g.pool.Namespace, Name: pool.Spec.ClusterName}
	if err := g.c.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			g.fail(&ConfigError{Reason: nodepoolv1.ReasonClusterNotFound, Kind: "Cluster", Object: key,
				Err: errors.New("not found: create the Cluster API Cluster in the pool's namespace; spec.clusterName cannot change, so recreate the pool to use another")})
			return nil
		}
		return fmt.Errorf("reading Cluster %s: %w", key, err)
	}
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
		g.fail(invalid("Cluster", key, joinErrors(errs)))
		return nil
	}
	ep := cluster.Spec.ControlPlaneEndpoint
	if ep.Host == "" {
		g.fail(&ConfigError{Reason: ReasonClusterNotReady, Kind: "Cluster", Object: key,
			Err: errors.New("has no spec.controlPlaneEndpoint.host yet: nodes could not reach the API server; waiting for the control plane provider to set it")})
		return nil
	}
	if err := validateHost(ep.Host); err != nil {
		g.fail(invalid("Cluster", key, &FieldError{Field: "spec.controlPlaneEndpoint.host", Err: err}))
		return nil
	}
	port := ep.Port
	if port == 0 {
		port = 6443
	}
	domain := network.ServiceDomain
	if domain == "" {
		domain = "cluster.local"
	}
	in.Cluster = ClusterInput{
		PodCIDRs:      normalizeList(network.Pods.CIDRBlocks),
		ServiceCIDRs:  normalizeList(network.Services.CIDRBlocks),
		ServiceDomain: domain,
		Endpoint:      Endpoint{Host: ep.Host, Port: port},
	}
	return nil
}

func (g *gatherer) gatherManagementConfig(ctx context.Context, key types.NamespacedName, in *Inputs) error {
	cm := &corev1.ConfigMap{}
	if err := g.c.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			g.fail(notFound("ConfigMap", key, "not found: the platform's management config is missing; create it with at least apiServerProxyImage in key %q, or start the controller with the right management config name", ManagementConfigKey))
			return nil
		}
		return fmt.Errorf("reading management config ConfigMap %s: %w", key, err)
	}
	mc, err := ParseManagementConfig([]byte(cm.Data[ManagementConfigKey]))
	if err != nil {
		g.fail(invalid("ConfigMap", key, fmt.Errorf("management config key %q: %w", ManagementConfigKey, err)))
		return nil
	}
	in.Management = mc
	return nil
}

// validatePEMCertificates checks that b holds at least one PEM certificate
// and nothing else.
func validatePEMCertificates(b []byte) error {
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(strings.TrimSpace(string(rest))) > 0 {
				return errors.New("holds text that is not a PEM block: keep only -----BEGIN CERTIFICATE----- blocks")
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a PEM block of type %q: keep only certificates, never keys", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("holds no PEM certificate")
	}
	return nil
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
