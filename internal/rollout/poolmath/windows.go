package poolmath

import (
	"errors"
	"fmt"
	"sync"
	"time"
	// The controller and the CLI read time zones from data built into the
	// binary, so a window means the same on every host.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Class is a kind of rollout, as the maintenance settings gate it.
type Class string

// Classes of rollouts.
const (
	// ClassPlatform: apply-pending, managementUpdates: Rollout, the drift
	// deadline. Always held by the windows.
	ClassPlatform Class = "Platform"
	// ClassOwner: owner changes (spec, version); held by the windows only
	// when spec.management.maintenance.gate lists Owner.
	ClassOwner Class = "Owner"
	// ClassRestart: rolloutAfter; held by the windows only when gate lists
	// Restart.
	ClassRestart Class = "Restart"
)

// Interval is [Start, End); a zero End has no end, a zero Start no start
// (the windows have been open for longer than the search looks back, see
// reach, or nothing ever closed it).
type Interval struct {
	Start, End time.Time
}

// Contains reports whether t is in the interval.
func (iv Interval) Contains(t time.Time) bool {
	return !t.Before(iv.Start) && (iv.End.IsZero() || t.Before(iv.End))
}

// Calendar is a pool's maintenance settings, parsed. It remembers the
// intervals it found, so it is not for concurrent use.
type Calendar struct {
	windows    []window
	found      map[int64]found
	exclusions []nodepoolv1.MaintenanceExclusion
	gate       map[Class]bool
	// Err says why the settings cannot be read (a schedule or time zone):
	// every gated rollout is then held.
	Err error
}

// horizon is how far ahead a window is looked for.
const horizon = 5 * 366 * 24 * time.Hour

// maxExclusions bounds how many exclusions one gate steps over.
const maxExclusions = 2000

// cronParser reads schedules as Kubernetes CronJob does: five fields or a
// descriptor.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// NewCalendar parses spec.management.maintenance (nil: no calendar).
func NewCalendar(m *nodepoolv1.Maintenance) *Calendar {
	if m == nil {
		return nil
	}
	c := &Calendar{exclusions: m.Exclusions, gate: map[Class]bool{ClassPlatform: true}}
	for _, g := range m.Gate {
		switch g {
		case nodepoolv1.GatedRolloutOwner:
			c.gate[ClassOwner] = true
		case nodepoolv1.GatedRolloutRestart:
			c.gate[ClassRestart] = true
		}
	}
	var errs []error
	for i, w := range m.Windows {
		zone := w.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		loc, err := loadZone(zone)
		if err != nil || zone == "Local" {
			errs = append(errs, fmt.Errorf("spec.management.maintenance.windows[%d].timeZone %q is not a time zone the controller knows (an IANA name such as Europe/Berlin)", i, w.TimeZone))
			continue
		}
		s, err := cronParser.Parse(w.Schedule)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.management.maintenance.windows[%d].schedule %q does not parse: %v", i, w.Schedule, err))
			continue
		}
		if w.Duration.Duration <= 0 {
			errs = append(errs, fmt.Errorf("spec.management.maintenance.windows[%d].duration must be positive", i))
			continue
		}
		c.windows = append(c.windows, window{schedule: s, duration: w.Duration.Duration, loc: loc})
	}
	c.Err = errors.Join(errs...)
	return c
}

// zones holds the time zones read so far: reading one from the data built
// into the binary parses it each time.
var zones sync.Map

func loadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err == nil {
		zones.Store(name, loc)
	}
	return loc, err
}

// Gates reports whether the windows hold rollouts of class (exclusions of
// scope All hold every class).
func (c *Calendar) Gates(class Class) bool { return c != nil && c.gate[class] }

// HasWindows reports whether any window is set.
func (c *Calendar) HasWindows() bool { return c != nil && len(c.windows) > 0 }

// holds reports whether exclusion e holds a rollout of class (the
// emergency path: only unbreakable exclusions hold).
func holds(e nodepoolv1.MaintenanceExclusion, class Class, emergency bool) bool {
	if emergency && !e.Unbreakable {
		return false
	}
	return e.Scope != nodepoolv1.ExclusionScopePlatform || class == ClassPlatform
}

// Gate is whether a rollout of some class may start at a time, and when.
type Gate struct {
	// Open: it may start now.
	Open bool
	// Allowed is the interval it may start in: the one open now, or the
	// next one. Its Start is when it opened (the window's opening, or the
	// end of an exclusion that held it; zero when nothing ever closed it),
	// so it is the same at every look during the interval. Found is false
	// when none opens within five years.
	Allowed Interval
	Found   bool
	// Exclusion names the exclusion that holds it now ("" when a window
	// is simply closed, or when Open).
	Exclusion string
	// Invalid: the settings cannot be read; nothing gated starts.
	Invalid bool
}

// GateAt says whether a rollout of class may start at now. Windows hold
// the classes they gate (not the emergency path); exclusions hold their
// scope whatever the windows say.
func (c *Calendar) GateAt(now time.Time, class Class, emergency bool) Gate {
	if c == nil {
		return Gate{Open: true, Found: true}
	}
	if c.Err != nil && (c.gate[class] && !emergency) {
		return Gate{Invalid: true}
	}
	useWindows := c.gate[class] && !emergency && len(c.windows) > 0
	g := Gate{}
	t := now
	for range maxExclusions {
		var iv Interval
		if useWindows {
			var ok bool
			if iv, ok = c.windowFrom(t); !ok {
				return g
			}
		}
		probe := t
		if iv.Start.After(t) {
			probe = iv.Start
		}
		if e, ok := c.exclusionAt(probe, class, emergency); ok {
			if probe.Equal(now) && g.Exclusion == "" {
				g.Exclusion = e.Name
			}
			t = e.End.Time
			if t.Sub(now) > horizon {
				return g
			}
			continue
		}
		for _, e := range c.exclusions {
			if !holds(e, class, emergency) {
				continue
			}
			// An exclusion that ended inside the interval opened it.
			if e.End.After(iv.Start) && !e.End.After(probe) {
				iv.Start = e.End.Time
			}
			// One that starts inside it closes it.
			if e.Start.After(probe) && (iv.End.IsZero() || e.Start.Time.Before(iv.End)) {
				iv.End = e.Start.Time
			}
		}
		g.Allowed, g.Found = iv, true
		g.Open = iv.Contains(now)
		if g.Open {
			g.Exclusion = ""
		}
		return g
	}
	return g
}

// exclusionAt is the exclusion holding class at t, the one ending last
// when several do.
func (c *Calendar) exclusionAt(t time.Time, class Class, emergency bool) (nodepoolv1.MaintenanceExclusion, bool) {
	var found nodepoolv1.MaintenanceExclusion
	ok := false
	for _, e := range c.exclusions {
		if holds(e, class, emergency) && !t.Before(e.Start.Time) && t.Before(e.End.Time) {
			if !ok || e.End.After(found.End.Time) {
				found, ok = e, true
			}
		}
	}
	return found, ok
}

func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}
