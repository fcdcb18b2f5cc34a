package simtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
)

// PayloadServer is the real payload server, in process, serving HTTPS on
// loopback with a certificate of a throwaway CA.
type PayloadServer struct {
	// URL is the payload URL machines fetch: https://127.0.0.1:<port>/ignition.
	URL string
	// CA is the PEM certificate of the CA machines must trust.
	CA []byte
	// Server is the running server.
	Server *payloadserver.Server
}

// StartPayloadServer starts a payload server watching the token and
// payload Secrets of every namespace through cfg, and returns once it is
// ready. It writes its certificate into dir and runs until ctx ends.
func StartPayloadServer(ctx context.Context, cfg *rest.Config, dir string, log logr.Logger) (*PayloadServer, error) {
	ca, err := testpki.NewCA("nodepool test payload server CA")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	certFile, keyFile, err := ca.WriteServingCert(dir, "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	s, err := payloadserver.New(payloadserver.Options{
		Config: cfg, Address: "127.0.0.1:0", ProbeAddress: "0",
		CertFile: certFile, KeyFile: keyFile, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	errs := make(chan error, 1)
	go func() { errs <- s.Start(ctx) }()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !s.Ready() {
		select {
		case err := <-errs:
			return nil, fmt.Errorf("the payload server stopped before it was ready: %w", err)
		case <-deadline.C:
			return nil, fmt.Errorf("the payload server was not ready within a minute")
		case <-tick.C:
		}
	}
	u := url.URL{Scheme: "https", Host: s.Addr().String(), Path: payloadserver.IgnitionPath}
	return &PayloadServer{URL: u.String(), CA: ca.PEM, Server: s}, nil
}
