package payloadserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// result is what became of a request, the label of the request metrics.
type result int

const (
	resultServed result = iota
	resultNoToken
	resultUnknownToken
	resultPayloadUnavailable
	resultNotReady
	resultNotFound
	resultMethodNotAllowed
	numResults
)

// resultNames are the values of the "result" label.
var resultNames = [numResults]string{
	resultServed:             "served",
	resultNoToken:            "no_token",
	resultUnknownToken:       "unknown_token",
	resultPayloadUnavailable: "payload_unavailable",
	resultNotReady:           "not_ready",
	resultNotFound:           "not_found",
	resultMethodNotAllowed:   "method_not_allowed",
}

// Metrics are the payload server's Prometheus metrics:
//
//	nodepool_payload_server_requests_total{result}           counter
//	nodepool_payload_server_request_duration_seconds{result} histogram
//	nodepool_payload_server_tokens                           gauge: token values indexed
//	nodepool_payload_server_token_secrets                    gauge
//	nodepool_payload_server_payloads                         gauge: payload Secrets indexed
//	nodepool_payload_server_invalid_secrets                  gauge: labelled Secrets that do not decode
//	nodepool_payload_server_first_fetch_records_total{result} counter: recorded, failed
//	nodepool_payload_server_ignored_payloads_total{reason}   counter: payload Secrets not served
//	nodepool_payload_server_index_bytes                      gauge: bytes the indexed payloads hold
//	nodepool_payload_server_delayed_failures_total           counter: failed token attempts held by the failure limiter
//
// "no_token" counts requests without a well-formed bearer token and
// "unknown_token" well-formed tokens that are not indexed; both got 511.
type Metrics struct {
	requests        [numResults]prometheus.Counter
	durations       [numResults]prometheus.Observer
	firstFetchOK    prometheus.Counter
	firstFetchError prometheus.Counter
	ignoredPayloads *prometheus.CounterVec
	delayed         prometheus.Counter
}

// NewMetrics registers the metrics of a server over index on reg.
func NewMetrics(reg prometheus.Registerer, index *Index) (*Metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_payload_server_requests_total",
		Help: "Requests to the payload server's TLS listener, by result.",
	}, []string{"result"})
	durations := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nodepool_payload_server_request_duration_seconds",
		Help:    "Time from a request's headers to the last byte of its response handed to TLS, by result.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"result"})
	firstFetch := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_payload_server_first_fetch_records_total",
		Help: "Attempts to record a token Secret's first fetch, by result (recorded, failed; a failure is retried).",
	}, []string{"result"})
	ignored := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_payload_server_ignored_payloads_total",
		Help: "Payload Secrets not served, by reason (invalid, too_large, not_owned, hash_mismatch, content_mismatch, owner_mismatch, pool_limit, namespace_full, index_full, name_mismatch); each Secret is counted and logged once.",
	}, []string{"reason"})
	delayed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodepool_payload_server_delayed_failures_total",
		Help: "Failed token attempts answered late because their source (remote IP) failed faster than the failure limit.",
	})
	for _, r := range IgnoredReasons {
		ignored.WithLabelValues(r)
	}
	gauge := func(name, help string, f func(IndexStats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(index.Stats())) })
	}
	cs := []prometheus.Collector{
		requests, durations, firstFetch, ignored, delayed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nodepool_payload_server_index_bytes",
			Help: "Bytes held by the indexed payloads (inflated JSON and gzip).",
		}, func() float64 { return float64(index.Stats().Bytes) }),
		gauge("nodepool_payload_server_tokens", "Token values indexed (current and previous tokens).",
			func(s IndexStats) int { return s.Tokens }),
		gauge("nodepool_payload_server_token_secrets", "Token Secrets indexed.",
			func(s IndexStats) int { return s.TokenSecrets }),
		gauge("nodepool_payload_server_payloads", "Payload Secrets indexed.",
			func(s IndexStats) int { return s.PayloadSecrets }),
		gauge("nodepool_payload_server_invalid_secrets", "Secrets labelled as token or payload Secrets that do not decode (see the log).",
			func(s IndexStats) int { return s.Invalid }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m := &Metrics{
		firstFetchOK:    firstFetch.WithLabelValues("recorded"),
		firstFetchError: firstFetch.WithLabelValues("failed"),
		ignoredPayloads: ignored,
		delayed:         delayed,
	}
	for r := range numResults {
		m.requests[r] = requests.WithLabelValues(resultNames[r])
		m.durations[r] = durations.WithLabelValues(resultNames[r])
	}
	return m, nil
}

func (m *Metrics) observe(r result, d time.Duration) {
	m.requests[r].Inc()
	m.durations[r].Observe(d.Seconds())
}

func (m *Metrics) firstFetch(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.firstFetchError.Inc()
		return
	}
	m.firstFetchOK.Inc()
}

func (m *Metrics) ignored(reason string) {
	if m == nil {
		return
	}
	m.ignoredPayloads.WithLabelValues(reason).Inc()
}

func (m *Metrics) delayedFailure() {
	if m == nil {
		return
	}
	m.delayed.Inc()
}
