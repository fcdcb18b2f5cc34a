package simtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/internal/userdata"
)

// Boot is what the NodePool controller makes for a pool's machines to boot
// from: a payload Secret, a token Secret pointing at it, and a user-data
// Secret pointing at the payload server with that token.
type Boot struct {
	// Pool is the pool's name, as the payload's node labels carry it.
	Pool string
	// Payload is the rendered payload.
	Payload *payload.Payload
	// Token is the token in the user-data.
	Token string
	// UserData, TokenSecret and PayloadSecret name the Secrets.
	UserData, TokenSecret, PayloadSecret string
}

// NodeLabels are the labels a Node that booted b's payload carries.
func (b *Boot) NodeLabels() map[string]string { return payload.NodeLabels(b.Pool, b.Payload.Hash) }

// NewPayload composes a real nodepool payload for pool: every component
// empty but the release, which records variant, so each variant has its own
// payload hash.
func NewPayload(pool, variant string) (*payload.Payload, error) {
	empty := []byte(`{"ignition":{"version":"` + igntypes.MaxVersion.String() + `"}}`)
	frags := map[inputs.Component][]byte{}
	for _, c := range inputs.Components() {
		frags[c] = empty
	}
	src := "data:;base64," + base64.StdEncoding.EncodeToString([]byte(variant+"\n"))
	release := fmt.Sprintf(`{"ignition":{"version":%q},"storage":{"files":[{"path":%q,"contents":{"source":%q}}]}}`,
		igntypes.MaxVersion.String(), payload.ReleasePath, src)
	frags[inputs.Release] = []byte(release)
	return payload.Compose(pool, frags)
}

// CreateBoot creates the payload Secret of NewPayload(pool, variant), a
// token Secret with a new token pointing at it, and the user-data Secret
// (for cluster) sending machines to the payload server with that token.
func (ps *PayloadServer) CreateBoot(ctx context.Context, c client.Client, namespace, cluster, pool, variant string) (*Boot, error) {
	p, err := NewPayload(pool, variant)
	if err != nil {
		return nil, err
	}
	b := &Boot{Pool: pool, Payload: p}
	if b.PayloadSecret, err = CreatePayloadSecret(ctx, c, namespace, p); err != nil {
		return nil, err
	}
	if b.Token, err = secrets.GenerateToken(); err != nil {
		return nil, err
	}
	if b.TokenSecret, err = CreateTokenSecret(ctx, c, namespace, pool, b.Token, p.Hash); err != nil {
		return nil, err
	}
	b.UserData = secrets.UserDataSecretName(pool, p.Hash)
	if err := ps.CreateUserData(ctx, c, namespace, cluster, b.UserData, b.Token); err != nil {
		return nil, err
	}
	return b, nil
}

// CreatePayloadSecret creates the payload Secret of p and returns its name.
func CreatePayloadSecret(ctx context.Context, c client.Client, namespace string, p *payload.Payload) (string, error) {
	sp := secrets.Payload{Pool: p.Pool, Hash: p.Hash, Ignition: p.Ignition, Manifest: map[string]string{}, Fragments: map[string][]byte{}}
	for comp, d := range p.Manifest {
		sp.Manifest[comp.Name()] = d
		sp.Fragments[comp.Name()] = p.Fragments[comp]
	}
	name := secrets.PayloadSecretName(p.Pool, p.Hash)
	s, err := secrets.NewPayloadSecret(namespace, name, sp)
	if err != nil {
		return "", err
	}
	if err := c.Create(ctx, s); err != nil {
		return "", fmt.Errorf("creating payload Secret %s/%s: %w", namespace, name, err)
	}
	return name, nil
}

// CreateTokenSecret creates a token Secret of pool whose current token is
// token, pointing at the payload with hash payloadHash, and returns its name.
func CreateTokenSecret(ctx context.Context, c client.Client, namespace, pool, token, payloadHash string) (string, error) {
	name := secrets.TokenSecretName(pool, payloadHash)
	s, err := secrets.NewTokenSecret(namespace, name, secrets.Token{Pool: pool, Current: token, RotatedAt: time.Now(), PayloadHash: payloadHash})
	if err != nil {
		return "", err
	}
	if err := c.Create(ctx, s); err != nil {
		return "", fmt.Errorf("creating token Secret %s/%s: %w", namespace, name, err)
	}
	return name, nil
}

// CreateUserData creates the bootstrap data Secret name of cluster holding
// a pointer config to the payload server with token.
func (ps *PayloadServer) CreateUserData(ctx context.Context, c client.Client, namespace, cluster, name, token string) error {
	data, err := userdata.Render(ps.URL, ps.CA, token)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, userdata.NewBootstrapSecret(namespace, name, cluster, data)); err != nil {
		return fmt.Errorf("creating user-data Secret %s/%s: %w", namespace, name, err)
	}
	return nil
}
