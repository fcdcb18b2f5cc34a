//go:build tools

// Package tools pins promtool.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
