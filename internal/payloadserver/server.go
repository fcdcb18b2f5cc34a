package payloadserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/internal/version"
)

// Defaults of Options.
const (
	DefaultAddress           = ":8443"
	DefaultProbeAddress      = ":8081"
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	// DefaultMaxHeaderBytes bounds request headers: a bearer token needs a
	// few dozen bytes. Larger headers get 431.
	DefaultMaxHeaderBytes = 16 << 10
	// shutdownTimeout is how long in-flight responses may finish after the
	// context ends.
	shutdownTimeout = 15 * time.Second
	// firstFetchWorkers patch token Secrets concurrently.
	firstFetchWorkers = 2
	// retryTimeout bounds reading one deferred payload Secret again.
	retryTimeout = 10 * time.Second
)

// Options configure a Server. Zero durations and sizes take the defaults.
type Options struct {
	// Config reaches the API server (required).
	Config *rest.Config
	// Namespace restricts the server to the token and payload Secrets of one
	// namespace; empty watches every namespace (unless Namespaces is set).
	Namespace string
	// Namespaces restricts the server to the Secrets of these namespaces
	// (together with Namespace); empty: every namespace.
	Namespaces []string
	// MirrorNamespace, when set, is the only namespace the server reads:
	// it serves the mirrors the controller writes there (its own
	// --mirror-namespace; see secrets.NewMirror) instead of the pools'
	// own Secrets, so it needs access to Secrets in that namespace only.
	// It is ready once the controller has mirrored every pool (the marker
	// secrets.MirrorsReadyName), so during an upgrade from the pools'
	// own Secrets the replicas reading those keep serving until then.
	// Exclusive with Namespace and Namespaces.
	MirrorNamespace string
	// Failures limit the rate of failed token attempts per source (remote
	// IP) before their answers are delayed (defaults for zero values).
	Failures FailureLimits
	// Limits bound the index: the inflated size of one payload, the
	// payloads per pool, the bytes of one namespace's payloads and of all
	// (defaults for zero values; MaxNamespaceBytes defaults to
	// NamespaceShare of MaxBytes and the namespaces served).
	// Limits.OnIgnored is the server's own.
	Limits IndexLimits
	// Address is the HTTPS listener of GET /ignition (DefaultAddress).
	Address string
	// ProbeAddress is the plain-HTTP listener of /healthz, /readyz and
	// /metrics (DefaultProbeAddress); "0" disables it.
	ProbeAddress string
	// CertFile and KeyFile hold the serving certificate (chain) and key in
	// PEM (required). They are re-read when they change.
	CertFile, KeyFile string
	// Timeouts and header limit of the HTTPS listener.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	// Registry receives the metrics; nil makes a new one with the Go and
	// process collectors and nodepool_build_info.
	Registry *prometheus.Registry
	// Logger; the zero value discards.
	Logger logr.Logger
	// Clock returns now (the first-fetch time recorded on token Secrets);
	// nil means time.Now. Tests of long spans inject a faster clock.
	Clock func() time.Time

	// patchClient replaces the client that patches token Secrets (tests
	// inject failures through it).
	patchClient client.Client
}

// namespaces returns Namespace and Namespaces, without repeats, or the
// MirrorNamespace: the namespaces whose Secrets the server reads.
func (o Options) namespaces() []string {
	if o.MirrorNamespace != "" {
		return []string{o.MirrorNamespace}
	}
	var out []string
	for _, n := range append([]string{o.Namespace}, o.Namespaces...) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&o.ReadTimeout, DefaultReadTimeout)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.ProbeAddress == "" {
		o.ProbeAddress = DefaultProbeAddress
	}
	return o
}

// Server is the payload server: an informer cache of token and payload
// Secrets feeding an Index, the HTTPS listener answering from it, the
// first-fetch recorder, and the probe listener.
type Server struct {
	opts  Options
	log   logr.Logger
	certs *certwatcher.CertWatcher
	cache cache.Cache
	// reader reads deferred payload Secrets again from the API server, as
	// the cache holds them without data.
	reader client.Reader
	// selector selects the Secrets served: the pools' own, or mirrors.
	selector labels.Selector
	// mirrorsReady says the controller has mirrored every pool (only
	// with MirrorNamespace).
	mirrorsReady atomic.Bool
	index        *Index
	recorder     *firstFetchRecorder
	https        *http.Server
	probe        *http.Server
	ln           net.Listener
	probeLn      net.Listener
	registry     *prometheus.Registry
	ready        atomic.Bool
}

// New checks the options, loads the certificate, and binds the listeners,
// so a bad flag or a busy port fails here rather than in Start. It does not
// contact the API server.
func New(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if opts.Config == nil {
		return nil, errors.New("payload server: no API server configuration")
	}
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("payload server: a serving certificate and key are required (--tls-cert-file, --tls-private-key-file): it serves HTTPS only")
	}
	certs, err := certwatcher.New(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("payload server: loading the serving certificate %s and key %s: %w", opts.CertFile, opts.KeyFile, err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, certs: certs}
	var metrics *Metrics
	limits := opts.Limits
	ignoredLog := s.log.WithName("index")
	limits.OnIgnored = func(e *IgnoredError) {
		metrics.ignored(e.Reason)
		// The error names the Secret and what is wrong, never content.
		ignoredLog.Error(e.Err, "not serving a payload Secret", "secret", e.Secret, "reason", e.Reason)
	}
	limits = limits.withDefaults()
	if opts.MirrorNamespace != "" && len(opts.Namespace+strings.Join(opts.Namespaces, "")) > 0 {
		return nil, errors.New("payload server: --mirror-namespace serves the controller's mirrors of every pool from one namespace; --namespace and --namespaces select pool namespaces to read the pools' own Secrets from: give one or the other")
	}
	if opts.Limits.MaxNamespaceBytes <= 0 {
		// Mirrors of every pool namespace live in one: its pools'
		// namespaces share the budget as when serving every namespace.
		served := len(opts.namespaces())
		if opts.MirrorNamespace != "" {
			served = 0
		}
		limits.MaxNamespaceBytes = NamespaceShare(limits.MaxBytes, served)
	}
	if limits.MaxNamespaceBytes > limits.MaxBytes {
		return nil, fmt.Errorf("payload server: --max-namespace-index-bytes (%d) is more than --max-index-bytes (%d)", limits.MaxNamespaceBytes, limits.MaxBytes)
	}
	s.index = NewIndexWithLimits(limits)
	s.selector = secrets.Selector()
	if opts.MirrorNamespace != "" {
		s.selector = secrets.MirrorSelector()
	}
	cacheOpts := cache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{
			// Only labelled Secrets are listed and watched, stripped to
			// what the index reads; payload Secrets are verified on the
			// way in and cached without their fragments. The pools' own
			// Secrets, or the controller's mirrors of them: never both.
			&corev1.Secret{}: {Label: s.selector, Transform: s.index.Transform},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
		// Nothing else is ever read: a Get of another type must fail
		// instead of starting an unrestricted informer.
		ReaderFailOnMissingInformer: true,
	}
	if ns := opts.namespaces(); len(ns) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range ns {
			cacheOpts.DefaultNamespaces[n] = cache.Config{}
		}
	}
	c, err := cache.New(opts.Config, cacheOpts)
	if err != nil {
		return nil, fmt.Errorf("payload server: creating the Secret cache: %w", err)
	}
	writer := opts.patchClient
	if writer == nil {
		if writer, err = client.New(opts.Config, client.Options{Scheme: scheme}); err != nil {
			return nil, fmt.Errorf("payload server: creating the API client: %w", err)
		}
	}
	if s.reader, err = client.New(opts.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("payload server: creating the API client: %w", err)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.NewCollector())
	}
	s.cache, s.registry = c, reg
	if metrics, err = NewMetrics(reg, s.index); err != nil {
		return nil, fmt.Errorf("payload server: registering metrics: %w", err)
	}
	s.recorder = newFirstFetchRecorder(c, writer, metrics, s.log.WithName("first-fetch"))
	if opts.Clock != nil {
		s.recorder.now = opts.Clock
	}
	handler := NewHandler(s.index, HandlerOptions{
		Metrics: metrics, Ready: s.ready.Load, OnFirstFetch: s.recorder.Observe,
		Failures: NewFailureLimiter(opts.Failures),
	})
	s.https = NewTLSServer(handler, certs.GetCertificate, opts)
	s.https.ErrorLog = newServerErrorLog(s.log.WithName("https"))

	if s.ln, err = net.Listen("tcp", opts.Address); err != nil {
		return nil, fmt.Errorf("payload server: listening on %s: %w", opts.Address, err)
	}
	if opts.ProbeAddress != "0" {
		if s.probeLn, err = net.Listen("tcp", opts.ProbeAddress); err != nil {
			_ = s.ln.Close()
			return nil, fmt.Errorf("payload server: listening on %s for probes and metrics: %w", opts.ProbeAddress, err)
		}
		s.probe = &http.Server{
			Handler:           ProbeHandler(s.ready.Load, reg),
			ReadHeaderTimeout: opts.ReadHeaderTimeout,
			ReadTimeout:       opts.ReadTimeout,
			WriteTimeout:      opts.WriteTimeout,
			IdleTimeout:       opts.IdleTimeout,
			MaxHeaderBytes:    opts.MaxHeaderBytes,
			ErrorLog:          newServerErrorLog(s.log.WithName("probe")),
		}
	}
	return s, nil
}

// Addr is the address of the HTTPS listener.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// ProbeAddr is the address of the probe listener, nil when disabled.
func (s *Server) ProbeAddr() net.Addr {
	if s.probeLn == nil {
		return nil
	}
	return s.probeLn.Addr()
}

// Index is the server's in-memory index.
func (s *Server) Index() *Index { return s.index }

// Ready says whether the index holds every token and payload Secret.
func (s *Server) Ready() bool { return s.ready.Load() }

// Start runs the server until ctx ends, then stops accepting connections
// and lets responses in flight finish. It returns the first failure of a
// listener.
func (s *Server) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reg, err := s.watch(ctx)
	if err != nil {
		_ = s.ln.Close()
		if s.probeLn != nil {
			_ = s.probeLn.Close()
		}
		return err
	}

	errs := make(chan error, 4)
	var running int
	spawn := func(name string, f func() error) {
		running++
		go func() {
			err := f()
			if err != nil {
				err = fmt.Errorf("payload server: %s: %w", name, err)
			}
			errs <- err
		}()
	}
	spawn("certificate watcher", func() error { return s.certs.Start(ctx) })
	spawn("Secret cache", func() error { return s.cache.Start(ctx) })
	spawn("first-fetch recorder", func() error { s.recorder.run(ctx, firstFetchWorkers); return nil })
	go s.becomeReady(ctx, reg)

	serve := func(srv *http.Server, run func() error) func() error {
		return func() error {
			done := make(chan struct{})
			go func() {
				defer close(done)
				<-ctx.Done()
				sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
				defer scancel()
				_ = srv.Shutdown(sctx)
			}()
			err := run()
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			cancel()
			<-done
			return err
		}
	}
	spawn("HTTPS listener", serve(s.https, func() error { return s.https.ServeTLS(s.ln, "", "") }))
	if s.probe != nil {
		spawn("probe listener", serve(s.probe, func() error { return s.probe.Serve(s.probeLn) }))
	}
	s.log.Info("serving payloads", "address", s.Addr().String(), "probeAddress", fmt.Sprint(s.ProbeAddr()), "namespaces", s.opts.namespaces())

	var first error
	for range running {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		} else if ctx.Err() == nil {
			// Something stopped without an error before shutdown: stop all.
			cancel()
		}
		s.ready.Store(false)
	}
	return first
}

// watch feeds the index from the Secret informer.
func (s *Server) watch(ctx context.Context) (toolscache.ResourceEventHandlerRegistration, error) {
	inf, err := s.cache.GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("payload server: creating the Secret informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.upsert,
		UpdateFunc: func(_, obj any) { s.upsert(obj) },
		DeleteFunc: s.delete,
	})
	if err != nil {
		return nil, fmt.Errorf("payload server: watching Secrets: %w", err)
	}
	return reg, nil
}

// becomeReady marks the server ready once the cache has listed every Secret
// and the index has seen them all.
func (s *Server) becomeReady(ctx context.Context, reg toolscache.ResourceEventHandlerRegistration) {
	if !s.cache.WaitForCacheSync(ctx) {
		return
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	waiting := false
	for !reg.HasSynced() || (s.opts.MirrorNamespace != "" && !s.mirrorsReady.Load()) {
		if reg.HasSynced() && !waiting {
			waiting = true
			s.log.Info("not ready until the controller has mirrored every pool", "marker", s.opts.MirrorNamespace+"/"+secrets.MirrorsReadyName)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	s.ready.Store(true)
	st := s.index.Stats()
	s.log.Info("ready", "tokenSecrets", st.TokenSecrets, "payloads", st.PayloadSecrets, "invalidSecrets", st.Invalid)
}

func (s *Server) upsert(obj any) {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	if secrets.KindOf(sec) == secrets.KindMirrorsReady {
		if sec.Name == secrets.MirrorsReadyName && s.opts.MirrorNamespace != "" {
			s.mirrorsReady.Store(true)
		}
		return
	}
	freed, err := s.index.UpsertFreeing(sec)
	s.logUpsert(sec, err)
	var ign *IgnoredError
	switch {
	case freed:
		// A payload replaced by a smaller or refused version made room.
		s.retryDeferred()
	case errors.As(err, &ign) && isLimit(ign.Reason) && s.index.deferredFits(types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}):
		// Room was made since the transform refused it.
		s.retryDeferred()
	}
}

func (s *Server) logUpsert(sec *corev1.Secret, err error) {
	var ign *IgnoredError
	if err != nil && !errors.As(err, &ign) { // ignored payloads are logged once by OnIgnored
		// Decoding errors name the Secret and the faulty key, never a token
		// or payload content.
		s.log.Error(err, "not serving an invalid Secret", "secret", types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name})
	}
}

func (s *Server) delete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	sec, ok := obj.(*corev1.Secret)
	if !ok || secrets.KindOf(sec) == secrets.KindMirrorsReady {
		return
	}
	s.index.DeleteIncarnation(types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}, sec.UID)
	s.recorder.Forget(sec.UID)
	if secrets.ServedKind(sec) == secrets.KindPayload {
		s.retryDeferred()
	}
}

// retryDeferred indexes again the payload Secrets refused for a limit that
// fit now that a payload has left the index. The cache holds them without
// data, so each is read again from the API server (a list of its name: the
// server may list Secrets, not get them).
func (s *Server) retryDeferred() {
	for _, name := range s.index.Admissible() {
		ctx, cancel := context.WithTimeout(context.Background(), retryTimeout)
		var list corev1.SecretList
		err := s.reader.List(ctx, &list, client.InNamespace(name.Namespace),
			client.MatchingLabelsSelector{Selector: s.selector},
			client.MatchingFields{"metadata.name": name.Name})
		cancel()
		if err != nil {
			// It stays deferred, tried again when another payload leaves.
			s.log.Error(err, "reading a deferred payload Secret again", "secret", name)
			continue
		}
		for i := range list.Items {
			s.logUpsert(&list.Items[i], s.index.Readmit(&list.Items[i]))
		}
		// Not listed: gone meanwhile, and its delete event forgets it.
	}
}

// TLSConfig is the TLS configuration of the HTTPS listener: TLS 1.2 or
// newer, forward-secret AEAD cipher suites only for TLS 1.2, and the
// certificate from getCertificate at each handshake (so a renewed
// certificate is used as soon as it is read).
func TLSConfig(getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCertificate,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}

// NewTLSServer returns the http.Server of the HTTPS listener for h, with
// TLSConfig and the timeouts and header limit of opts (defaults for zero
// values). Serve it with ServeTLS(listener, "", "").
func NewTLSServer(h http.Handler, getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error), opts Options) *http.Server {
	opts = opts.withDefaults()
	return &http.Server{
		Handler:           h,
		TLSConfig:         TLSConfig(getCertificate),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
	}
}

// ProbeHandler serves /healthz (the process serves), /readyz (ready()
// holds: the index holds every Secret) and /metrics (reg).
func ProbeHandler(ready func() bool, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			writeText(w, http.StatusServiceUnavailable, "the Secret cache has not synced\n")
			return
		}
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
