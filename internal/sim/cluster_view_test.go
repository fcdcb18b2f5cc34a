package sim

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

func TestNodePath(t *testing.T) {
	for p, want := range map[string]struct {
		name  string
		nodes bool
	}{
		"/api/v1/nodes":               {"", true},
		"/api/v1/watch/nodes":         {"", true},
		"/api/v1/nodes/a.ns":          {"a.ns", true},
		"/api/v1/nodes/a.ns/status":   {"a.ns", true},
		"/api/v1/watch/nodes/a.ns":    {"a.ns", true},
		"/api/v1/namespaces/x/pods":   {"", false},
		"/api/v1/nodesx":              {"", false},
		"/apis/apps/v1/nodes":         {"", false},
		"/api":                        {"", false},
		"/api/v1/namespaces/kube-sys": {"", false},
	} {
		name, nodes := nodePath(p)
		if name != want.name || nodes != want.nodes {
			t.Errorf("nodePath(%q) = %q, %v; want %q, %v", p, name, nodes, want.name, want.nodes)
		}
	}
}

func TestSplitClusterPath(t *testing.T) {
	c, rest, ok := splitClusterPath("/clusters/ns/c1/api/v1/nodes")
	if !ok || c != (client.ObjectKey{Namespace: "ns", Name: "c1"}) || rest != "/api/v1/nodes" {
		t.Fatalf("got %v %q %v", c, rest, ok)
	}
	if c, rest, ok = splitClusterPath("/clusters/ns/c1"); !ok || rest != "/" {
		t.Fatalf("the root of a view: got %v %q %v", c, rest, ok)
	}
	for _, p := range []string{"/", "/api/v1/nodes", "/clusters/ns", "/clusters//c1/api"} {
		if _, _, ok := splitClusterPath(p); ok {
			t.Errorf("%q is not a Cluster's path", p)
		}
	}
}

// TestAClustersViewHoldsItsOwnNodes: the view narrows Node lists and
// watches to its Cluster's labels (keeping the caller's selector), answers
// not found for a Node of another Cluster without asking the API server,
// forwards the rest with the sim's credentials, and refuses another
// Cluster's token.
func TestAClustersViewHoldsItsOwnNodes(t *testing.T) {
	var got []*http.Request
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r)
		_, _ = w.Write([]byte("{}"))
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	mine, other := client.ObjectKey{Namespace: "ns", Name: "c1"}, client.ObjectKey{Namespace: "ns", Name: "c2"}
	nodes := fake.NewClientBuilder().WithObjects(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a.ns", Labels: map[string]string{simv1.LabelClusterNamespace: "ns", simv1.LabelClusterName: "c1"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b.ns", Labels: map[string]string{simv1.LabelClusterNamespace: "ns", simv1.LabelClusterName: "c2"}}},
	).Build()
	v := &clusterViews{upstream: u, transport: http.DefaultTransport, nodes: nodes, key: []byte("key")}
	h := v.handler(v.reverseProxy())
	do := func(cluster client.ObjectKey, token, path string) int {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "http://view/clusters/"+cluster.Namespace+"/"+cluster.Name+path, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}

	if code := do(mine, v.token(mine), "/api/v1/nodes?labelSelector=role%3Dworker&watch=true"); code != http.StatusOK || len(got) != 1 {
		t.Fatalf("list: %d, %d requests", code, len(got))
	}
	q := got[0].URL.Query()
	if q.Get("labelSelector") != "role=worker,"+simv1.LabelClusterNamespace+"=ns,"+simv1.LabelClusterName+"=c1" || q.Get("watch") != "true" || got[0].URL.Path != "/api/v1/nodes" {
		t.Fatalf("forwarded %s", got[0].URL)
	}
	if a := got[0].Header.Get("Authorization"); a != "" {
		t.Fatalf("the Cluster's token was forwarded: %q", a)
	}
	if code := do(mine, v.token(mine), "/api/v1/nodes/b.ns"); code != http.StatusNotFound || len(got) != 1 {
		t.Fatalf("another Cluster's Node: %d, %d requests", code, len(got))
	}
	for _, p := range []string{"/api/v1/nodes/a.ns/status", "/api/v1/nodes/new.ns", "/api/v1/namespaces/default/pods?labelSelector=x%3Dy"} {
		if code := do(mine, v.token(mine), p); code != http.StatusOK {
			t.Fatalf("%s: %d", p, code)
		}
	}
	if last := got[len(got)-1].URL; last.Query().Get("labelSelector") != "x=y" {
		t.Fatalf("a pod list was narrowed: %s", last)
	}
	if code := do(mine, v.token(other), "/api/v1/nodes"); code != http.StatusUnauthorized {
		t.Fatalf("another Cluster's token: %d", code)
	}
}

// Every connected Cluster's clients probe its API server every 10 s
// (Cluster API's ClusterCache and the controller's): a view answers the
// probe itself, as each workload cluster's own API server would, rather
// than pass thousands a minute to the one API server behind every view.
func TestAClustersViewAnswersItsHealthProbeItself(t *testing.T) {
	forwarded := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded++
		_, _ = w.Write([]byte("{}"))
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	mine := client.ObjectKey{Namespace: "ns", Name: "c1"}
	v := &clusterViews{upstream: u, transport: http.DefaultTransport, nodes: fake.NewClientBuilder().Build(), key: []byte("key")}
	h := v.handler(v.reverseProxy())
	probe := func(token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "http://view/clusters/ns/c1/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := probe(v.token(mine)); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"/api"`) || forwarded != 0 {
		t.Errorf("the health probe: %d %s, %d requests forwarded; want 200 with the paths, none forwarded", w.Code, w.Body, forwarded)
	}
	if w := probe("not-the-token"); w.Code != http.StatusUnauthorized {
		t.Errorf("the health probe with another token: %d, want 401", w.Code)
	}
}
