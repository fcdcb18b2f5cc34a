package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatedRollout names a kind of rollout that the owner lets the pool's
// maintenance windows hold besides the platform's.
// +kubebuilder:validation:Enum=Owner;Restart
type GatedRollout string

const (
	// GatedRolloutOwner: owner changes (spec, version) start only inside a
	// window.
	GatedRolloutOwner GatedRollout = "Owner"
	// GatedRolloutRestart: forced restarts (rolloutAfter) start only inside
	// a window.
	GatedRolloutRestart GatedRollout = "Restart"
)

// ExclusionScope says which rollouts a maintenance exclusion holds.
// +kubebuilder:validation:Enum=All;Platform
type ExclusionScope string

const (
	// ExclusionScopeAll holds every rollout: owner changes, restarts and
	// the platform's.
	ExclusionScopeAll ExclusionScope = "All"
	// ExclusionScopePlatform holds platform-initiated rollouts only
	// (apply-pending, managementUpdates: Rollout, the drift deadline).
	ExclusionScopePlatform ExclusionScope = "Platform"
)

// Annotations of the emergency path: a forced rollout (apply-pending or
// rolloutAfter) whose time equals AnnotationOutsideWindowsAt starts at once,
// outside the maintenance windows, if AnnotationOutsideWindowsReason says
// why (`kubectl nodepool rollout apply-pending|restart --outside-windows
// --reason ...` sets both). An unbreakable exclusion still holds it.
const (
	AnnotationOutsideWindowsAt     = "nodepool.dev/outside-windows-at"
	AnnotationOutsideWindowsReason = "nodepool.dev/outside-windows-reason"
)

// Maintenance says when the rollouts of a pool may start: inside its
// recurring windows, outside its exclusions, and at the latest at the first
// window after pending platform drift is older than driftDeadline. A
// rollout that started inside a window runs to completion.
// +kubebuilder:validation:XValidation:rule="has(self.windows) || has(self.exclusions) || has(self.driftDeadline)",message="spec.management.maintenance must set windows, exclusions or driftDeadline (or be removed)"
type Maintenance struct {
	// windows are recurring intervals during which gated rollouts may
	// start. Without windows every time is allowed, except exclusions.
	// Overlapping windows merge.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Windows []MaintenanceWindow `json:"windows,omitempty"`

	// exclusions are absolute intervals during which no rollout of their
	// scope starts, even inside a window.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	Exclusions []MaintenanceExclusion `json:"exclusions,omitempty"`

	// gate lists the owner's rollouts the windows hold too: Owner (spec
	// and version changes) and Restart (rolloutAfter). Platform-initiated
	// rollouts are always held. Empty (the default): the owner's own
	// changes roll at once.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	Gate []GatedRollout `json:"gate,omitempty"`

	// driftDeadline bounds how long pending platform drift may wait: drift
	// first seen longer ago than this is applied at the next window (a
	// forced rollout recorded with initiator "deadline"). Between 1h and
	// 8760h (one year).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h') && duration(self) <= duration('8760h')",message="spec.management.maintenance.driftDeadline must be a duration between 1h and 8760h (one year), such as 720h"
	DriftDeadline *metav1.Duration `json:"driftDeadline,omitempty"`
}

// MaintenanceWindow is a recurring interval: it opens at every time of its
// cron schedule, in its time zone, and lasts duration.
type MaintenanceWindow struct {
	// schedule is a cron schedule of five fields (minute hour day-of-month
	// month day-of-week, as a Kubernetes CronJob's) or a descriptor such as
	// @weekly: when the window opens. A start time that does not exist on
	// the night clocks go forward opens the window when they have; one that
	// happens twice when clocks go back opens it once, the first time.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9A-Za-z*/,?-]+( +[0-9A-Za-z*/,?-]+){4})$')",messageExpression="'spec.management.maintenance.windows[].schedule must be a cron schedule of five fields (minute hour day-of-month month day-of-week) such as \"0 2 * * 6\", or @yearly, @monthly, @weekly, @daily or @hourly; set the time zone in timeZone, got \"' + self + '\"'"
	Schedule string `json:"schedule"`

	// duration is how long the window stays open (elapsed time), between
	// 1m and 168h (one week).
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="spec.management.maintenance.windows[].duration must be a duration between 1m and 168h (one week), such as 4h"
	Duration metav1.Duration `json:"duration"`

	// timeZone is the IANA time zone the schedule is read in, such as
	// Europe/Berlin. Default UTC. The time zone data is built into the
	// controller; a name it does not know holds the gated rollouts and
	// sets MaintenanceWindow=False (reason InvalidMaintenanceSettings).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')",messageExpression="'spec.management.maintenance.windows[].timeZone must be an IANA time zone name such as Europe/Berlin or UTC, got \"' + self + '\"'"
	TimeZone string `json:"timeZone,omitempty"`
}

// MaintenanceExclusion is an absolute interval during which no rollout of
// its scope starts.
// +kubebuilder:validation:XValidation:rule="timestamp(self.end) > timestamp(self.start)",message="spec.management.maintenance.exclusions[].end must be after its start"
type MaintenanceExclusion struct {
	// name identifies the exclusion in conditions and messages, such as
	// year-end-freeze.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// start is when the exclusion begins (RFC3339).
	// +required
	Start metav1.Time `json:"start"`
	// end is when it ends (RFC3339), after start.
	// +required
	End metav1.Time `json:"end"`
	// scope is All (every rollout, the owner's too; the default) or
	// Platform (platform-initiated rollouts only).
	// +optional
	// +kubebuilder:default=All
	Scope ExclusionScope `json:"scope,omitempty"`
	// unbreakable: not even the emergency path (--outside-windows) starts
	// a rollout during the exclusion.
	// +optional
	Unbreakable bool `json:"unbreakable,omitempty"`
}

// MaintenanceStatus is where the pool's maintenance settings stand.
type MaintenanceStatus struct {
	// nextWindow is the window in which a platform rollout may start: the
	// one open now, or the next one (exclusions taken out). Unset when none
	// opens within five years.
	// +optional
	NextWindow *WindowInterval `json:"nextWindow,omitempty"`
	// driftDeadline is when the oldest pending platform drift reaches
	// spec.management.maintenance.driftDeadline: from then it is applied
	// at the next window.
	// +optional
	DriftDeadline *metav1.Time `json:"driftDeadline,omitempty"`
	// waiting says which rollout waits for the window, if one does.
	// +optional
	Waiting string `json:"waiting,omitempty"`
}

// WindowInterval is one interval in which rollouts may start: the
// openings of every window that overlap or touch merged (exclusions taken
// out), the same at every look while it lasts.
type WindowInterval struct {
	// start is when the interval opened. Unset when it has no start: the
	// windows have been open for more than 8 days (a window that is always
	// open), or there are only exclusions and none has ended.
	// +optional
	Start metav1.Time `json:"start,omitzero"`
	// end is unset when the interval has no end: it lasts more than 8 days
	// from its start (or from now, when it has none), or there are only
	// exclusions and none is ahead.
	// +optional
	End *metav1.Time `json:"end,omitempty"`
}
