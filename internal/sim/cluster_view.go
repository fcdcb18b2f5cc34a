package sim

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// Every simulated Node of every Cluster lives on one API server. A fleet's
// Clusters are each their own API server: a Cluster's clients (Cluster
// API's ClusterCache, nodepool's controller) list and watch its Nodes
// only, and hold only those in their caches. clusterViews gives each
// Cluster that view of the one API server: its kubeconfig Secret points at
// /clusters/<namespace>/<name>/ of a proxy, which forwards every request
// with the sim's own credentials, narrows Node lists and watches to the
// Nodes labelled with the Cluster (simv1.LabelClusterNamespace,
// simv1.LabelClusterName), and answers not found for a Node of another
// Cluster. Each Cluster's kubeconfig carries its own token, good for its
// own path only, and the CA of the proxy's own certificate (clients send
// credentials over TLS only).
type clusterViews struct {
	listener net.Listener
	// host is the listener's address as clients dial it.
	host      string
	tls       *tls.Config
	ca        []byte
	upstream  *url.URL
	transport http.RoundTripper
	// nodes reads the sim's cache of every Node: a Node it holds with
	// another Cluster's labels is not the asking Cluster's.
	nodes client.Reader
	key   []byte
}

// newClusterViews listens on address (host:port; port 0 picks one) and
// forwards to the API server of cfg.
func newClusterViews(address string, cfg *rest.Config, nodes client.Reader) (*clusterViews, error) {
	upstream, err := url.Parse(cfg.Host)
	if err != nil || upstream.Host == "" {
		// A bare host:port, as rest.Config allows.
		if upstream, err = url.Parse("https://" + cfg.Host); err != nil {
			return nil, fmt.Errorf("the workload API server address %q: %w", cfg.Host, err)
		}
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the transport to the workload API server: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening for the Clusters' views of the workload API server: %w", err)
	}
	v := &clusterViews{listener: l, host: dialable(l.Addr()), upstream: upstream, transport: transport, nodes: nodes, key: key}
	h, _, _ := net.SplitHostPort(v.host)
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(h, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"})
	if err == nil {
		var pair tls.Certificate
		if pair, err = tls.X509KeyPair(certPEM, keyPEM); err == nil {
			v.tls, v.ca = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, certPEM
		}
	}
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("the certificate of the Clusters' views of the workload API server: %w", err)
	}
	return v, nil
}

// dialable is a listener's address as a client dials it: an unspecified
// IP (listening on every interface) is dialled as the loopback.
func dialable(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok || !t.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(t.Port))
}

// configFor is what the kubeconfig Secret of cluster holds: its path of
// the proxy and its token.
func (v *clusterViews) configFor(cluster client.ObjectKey) *rest.Config {
	return &rest.Config{
		Host:            "https://" + v.host + "/clusters/" + cluster.Namespace + "/" + cluster.Name,
		BearerToken:     v.token(cluster),
		TLSClientConfig: rest.TLSClientConfig{CAData: v.ca},
	}
}

func (v *clusterViews) token(cluster client.ObjectKey) string {
	m := hmac.New(sha256.New, v.key)
	m.Write([]byte(cluster.Namespace + "/" + cluster.Name))
	return hex.EncodeToString(m.Sum(nil))
}

// Start serves until ctx is done (a manager Runnable).
func (v *clusterViews) Start(ctx context.Context) error {
	srv := &http.Server{Handler: v.handler(v.reverseProxy()), ReadHeaderTimeout: 10 * time.Second, TLSConfig: v.tls}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			_ = srv.Close() // open watches are never idle
		}
	}()
	if err := srv.ServeTLS(v.listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// reverseProxy forwards a request handler has rewritten.
func (v *clusterViews) reverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:       func(*httputil.ProxyRequest) {},
		Transport:     v.transport,
		FlushInterval: -1, // watches stream
		// A client that closes a watch is no error; the client of a failed
		// request is told (502).
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

// NeedLeaderElection: every replica serves the views its kubeconfig
// Secrets may point at.
func (v *clusterViews) NeedLeaderElection() bool { return false }

func (v *clusterViews) handler(proxy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cluster, rest, ok := splitClusterPath(r.URL.Path)
		if !ok {
			http.Error(w, "not a Cluster's path: want /clusters/<namespace>/<name>/...", http.StatusNotFound)
			return
		}
		want := "Bearer " + v.token(cluster)
		if !hmac.Equal([]byte(r.Header.Get("Authorization")), []byte(want)) {
			writeStatus(w, http.StatusUnauthorized, "Unauthorized", "not this Cluster's token")
			return
		}
		if rest == "/" && r.Method == http.MethodGet {
			// The health probe of a Cluster's clients (Cluster API's
			// ClusterCache probes every connected Cluster every 10 s, the
			// controller's likewise): a workload cluster's API server
			// answers its own, so the one API server behind every view
			// does not answer thousands of them a minute.
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(rootPaths)
			return
		}
		// The forwarded request authenticates with the sim's credentials.
		r.Header.Del("Authorization")
		query := r.URL.Query()
		switch name, ok := nodePath(rest); {
		case !ok:
		case name == "":
			query.Set("labelSelector", withClusterSelector(query.Get("labelSelector"), cluster))
		case !v.holds(r.Context(), cluster, name):
			writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("nodes %q not found", name))
			return
		}
		r.URL.Scheme, r.URL.Host = v.upstream.Scheme, v.upstream.Host
		r.URL.Path = strings.TrimSuffix(v.upstream.Path, "/") + rest
		r.URL.RawPath = ""
		r.URL.RawQuery = query.Encode()
		r.Host = v.upstream.Host
		proxy.ServeHTTP(w, r)
	})
}

// holds says whether Node name may be cluster's: not when the sim's cache
// holds it labelled with another Cluster. A Node the cache does not hold
// yet (just registered) or that carries no Cluster labels is let through.
func (v *clusterViews) holds(ctx context.Context, cluster client.ObjectKey, name string) bool {
	n := &corev1.Node{}
	if err := v.nodes.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return true
	}
	ns, ok := n.Labels[simv1.LabelClusterNamespace]
	if !ok {
		return true
	}
	return ns == cluster.Namespace && n.Labels[simv1.LabelClusterName] == cluster.Name
}

// splitClusterPath splits /clusters/<namespace>/<name>/<rest> into the
// Cluster and /<rest>.
func splitClusterPath(p string) (client.ObjectKey, string, bool) {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 4)
	if len(parts) < 3 || parts[0] != "clusters" || parts[1] == "" || parts[2] == "" {
		return client.ObjectKey{}, "", false
	}
	rest := "/"
	if len(parts) == 4 {
		rest += parts[3]
	}
	return client.ObjectKey{Namespace: parts[1], Name: parts[2]}, rest, true
}

// nodePath says whether an API path is of Nodes, and which Node: "" for
// the collection (a list, a watch, a create).
func nodePath(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "/api/v1/")
	if !ok {
		return "", false
	}
	rest = strings.TrimPrefix(rest, "watch/")
	rest, ok = strings.CutPrefix(rest, "nodes")
	switch {
	case !ok:
		return "", false
	case rest == "" || rest == "/":
		return "", true
	case rest[0] != '/':
		return "", false // nodesomething
	}
	name, _, _ := strings.Cut(rest[1:], "/")
	return name, true
}

// rootPaths is a view's answer to GET /, as an API server lists its paths.
var rootPaths = []byte(`{"paths":["/api","/api/v1","/apis","/healthz","/livez","/readyz","/version"]}`)

// withClusterSelector adds cluster's labels to a label selector.
func withClusterSelector(selector string, cluster client.ObjectKey) string {
	own := simv1.LabelClusterNamespace + "=" + cluster.Namespace + "," + simv1.LabelClusterName + "=" + cluster.Name
	if selector == "" {
		return own
	}
	return selector + "," + own
}

// writeStatus answers as the API server would, with a Status.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	b, _ := json.Marshal(metav1.Status{ // a Status always encodes
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: metav1.StatusReason(reason), Code: int32(code),
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
