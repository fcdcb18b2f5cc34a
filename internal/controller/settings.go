package controller

import (
	"fmt"
	"time"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/settings"
)

// DefaultNodeUpdateNamespace is where InPlace pools' update Secrets live
// in each workload cluster.
const DefaultNodeUpdateNamespace = "kube-system"

// Settings configure the NodePool controller.
type Settings struct {
	// Inputs are the controller settings every payload depends on: payload
	// server URL and CA, renderer version, management config location.
	Inputs inputs.Settings
	// TokenTTL is how long a token is valid; it rotates at half of it and
	// the previous token stays valid until the next rotation. Default 4h.
	TokenTTL time.Duration
	// CleanupGracePeriod is how long an unreferenced Secret is kept before
	// it is deleted. Default 10m.
	CleanupGracePeriod time.Duration
	// ResyncPeriod is how often a settled pool is looked at again. Default 5m.
	ResyncPeriod time.Duration
	// HistoryLimit is how many finished rollout records a pool whose
	// spec.management.revisionHistoryLimit is unset keeps. Default 10.
	HistoryLimit int
	// NodeAgentTimeout is how long an InPlace node's agent may take to
	// finish an update before the pool's update holds as Degraded; 0 waits
	// forever. Default 30m.
	NodeAgentTimeout time.Duration
	// NodeUpdateNamespace is the namespace of each workload cluster where
	// the controller writes the Secret InPlace pools' node agents fetch
	// their update with. Default kube-system.
	NodeUpdateNamespace string
	// PublishNamespace is where the controller publishes its settings for
	// the CLI (the ConfigMap nodepool-controller-settings). Default
	// nodepool-system.
	PublishNamespace string
	// RenderCacheSize is how many pools' rendered inputs the render cache
	// keeps (the least recently reconciled are forgotten first): at least
	// the pools of the shard. Default 20000.
	RenderCacheSize int
	// MirrorNamespace, when set, is where the controller writes a mirror
	// of each pool's token Secrets and of the payload Secrets they point
	// to, for a payload server that reads Secrets there only (mirror.go).
	// Empty: no mirrors (a payload server reading the pools' namespaces).
	MirrorNamespace string
	// Shard is the part of the fleet this controller owns (shard.go); the
	// zero Shard owns every pool.
	Shard Shard
	// Clock returns now; nil means time.Now. Tests run long spans (token
	// rotation over days) with a clock that runs faster than real time.
	Clock func() time.Time
}

// Default fills unset settings.
func (s *Settings) Default() {
	if s.TokenTTL == 0 {
		s.TokenTTL = 4 * time.Hour
	}
	if s.CleanupGracePeriod == 0 {
		s.CleanupGracePeriod = 10 * time.Minute
	}
	if s.ResyncPeriod == 0 {
		s.ResyncPeriod = 5 * time.Minute
	}
	if s.NodeAgentTimeout == 0 {
		s.NodeAgentTimeout = 30 * time.Minute
	}
	if s.HistoryLimit == 0 {
		s.HistoryLimit = 10
	}
	if s.PublishNamespace == "" {
		s.PublishNamespace = settings.DefaultNamespace
	}
	if s.NodeUpdateNamespace == "" {
		s.NodeUpdateNamespace = DefaultNodeUpdateNamespace
	}
	if s.RenderCacheSize == 0 {
		s.RenderCacheSize = 20000
	}
}

// Validate says what is wrong with the settings.
func (s Settings) Validate() error {
	if err := s.Inputs.Validate(); err != nil {
		return err
	}
	if s.TokenTTL < 2*time.Second {
		return fmt.Errorf("token TTL %s is too short: it must be at least 2s (production: hours)", s.TokenTTL)
	}
	if s.CleanupGracePeriod < 0 {
		return fmt.Errorf("cleanup grace period %s must not be negative", s.CleanupGracePeriod)
	}
	return nil
}

// engine is what the engine needs of the settings.
func (s Settings) engine() rollout.Settings {
	return rollout.Settings{TokenTTL: s.TokenTTL, CleanupGracePeriod: s.CleanupGracePeriod,
		NodeAgentTimeout: s.NodeAgentTimeout, ResyncPeriod: s.ResyncPeriod}
}
