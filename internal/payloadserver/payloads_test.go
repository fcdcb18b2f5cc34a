package payloadserver

import (
	"fmt"
	"strings"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// The test payloads, used by every test of the package, the fuzz targets
// too: a fuzz target's build (go test -fuzz -tags fuzzonly) compiles only
// the files without the fuzzonly constraint, and every package they need
// instrumented, so it leaves out the tests of the real stack.

// marker is in every test payload and in nothing else a server sends.
const marker = "nodepool-test-payload"

// testPayload is a payload of pool ns/name at a version, composed as the
// controller composes one (so the server's content check passes): its
// user-configs fragment writes a file whose contents name all three and are
// padded so the Ignition JSON is at least size bytes.
func testPayload(ns, pool, version string, size int) secrets.Payload {
	id := fmt.Sprintf("%s/%s/%s", ns, pool, version)
	return composePayload(pool, id, size)
}

// composePayload composes a payload of pool whose user-configs fragment
// carries marker, id and padding.
func composePayload(pool, id string, size int) secrets.Payload {
	enc := strings.ReplaceAll(id, "/", "%2F")
	pad := ""
	if n := size - 1200; n > 0 {
		pad = strings.Repeat("p", n)
	}
	user := fmt.Sprintf(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/nodepool-test/id","contents":{"source":"data:,%s-%s-%s"}}]}}`, marker, enc, pad)
	frags := map[inputs.Component][]byte{}
	for _, c := range inputs.Components() {
		frags[c] = []byte(`{"ignition":{"version":"3.5.0"}}`)
	}
	frags[inputs.UserConfigs] = []byte(user)
	p, err := payload.Compose(pool, frags)
	if err != nil {
		panic(fmt.Sprintf("composing the test payload %s: %v", id, err))
	}
	out := secrets.Payload{Pool: pool, Hash: p.Hash, Ignition: p.Ignition, Manifest: map[string]string{}, Fragments: map[string][]byte{}}
	for c, f := range p.Fragments {
		out.Manifest[c.Name()] = p.Manifest[c]
		out.Fragments[c.Name()] = f
	}
	return out
}

// payloadName is the name the controller gives payload p's Secret, the
// only one the server serves it from.
func payloadName(p secrets.Payload) string { return secrets.PayloadSecretName(p.Pool, p.Hash) }
