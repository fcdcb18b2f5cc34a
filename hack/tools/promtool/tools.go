//go:build tools

// Package tools pins promtool and the Prometheus server (the test that
// scrapes nodepool with a real Prometheus runs it).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
