package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/labels"
)

// FileRestartWindow is a restart window: the times when restarts may
// happen, openings on a cron schedule that each last Duration.
type FileRestartWindow struct {
	// Name is how workloads pick it (annotations.window).
	Name string `json:"name"`
	// Schedule is when it opens: five cron fields (minute, hour, day of
	// month, month, day of week) or a descriptor such as @daily, read as
	// Kubernetes' CronJob controller reads them (robfig/cron/v3).
	Schedule string `json:"schedule"`
	// Duration is how long each opening lasts.
	Duration Duration `json:"duration"`
	// TimeZone is the IANA time zone the schedule is read in, e.g.
	// Europe/Berlin; empty means UTC.
	TimeZone string `json:"timeZone"`
	// NamespaceSelector, a Kubernetes label selector on Namespaces, makes
	// this the window of the workloads of the namespaces it selects that
	// pick none themselves. The first window whose selector selects a
	// namespace is its.
	NamespaceSelector string `json:"namespaceSelector"`
}

// FileMinIntervalAnnotation is a workload annotation read as its minimum
// interval, beside annotations.minInterval (Reloader's pause-period).
type FileMinIntervalAnnotation struct {
	Annotation string `json:"annotation"`
}

// NoWindow is the annotations.window value that opts a workload out of its
// namespace's window.
const NoWindow = "none"

// Window is a compiled restart window.
type Window struct {
	Name     string
	Duration time.Duration
	Location *time.Location
	// Namespaces select the namespaces whose workloads it is the window of
	// by default; nil selects none.
	Namespaces labels.Selector
	schedule   cron.Schedule
}

// maxWindowOpenings bounds how many openings At steps through to find the
// end of overlapping ones: a window open all the time (every minute, for an
// hour) is open, its end found no further.
const maxWindowOpenings = 1000

// At says whether the window is open at now and, if so, when it closes;
// if not, when it opens next (zero if it never does). Openings that
// overlap make one longer opening.
func (w Window) At(now time.Time) (open bool, opens, closes time.Time) {
	first := w.schedule.Next(now.Add(-w.Duration))
	if first.IsZero() || first.After(now) {
		return false, first, time.Time{}
	}
	closes = first.Add(w.Duration)
	for i := 0; i < maxWindowOpenings; i++ {
		next := w.schedule.Next(first)
		if next.IsZero() || next.After(closes) {
			break
		}
		first, closes = next, next.Add(w.Duration)
	}
	return true, time.Time{}, closes
}

const (
	minWindowDuration = time.Minute
	maxWindowDuration = 7 * 24 * time.Hour
	minMinInterval    = time.Second
	maxMinInterval    = 7 * 24 * time.Hour
)

// compileWindows checks the restart windows: names unique and not "none",
// schedules read by robfig/cron's standard parser (no time zone in them:
// timeZone says it), durations in range, zones known.
func compileWindows(f []FileRestartWindow, p *problems) []Window {
	out := make([]Window, 0, len(f))
	names := map[string]bool{}
	for i, fw := range f {
		path := fmt.Sprintf("restartWindows[%d]", i)
		w := Window{Name: fw.Name, Duration: time.Duration(fw.Duration), Location: time.UTC}
		switch dup := names[fw.Name]; {
		case fw.Name == "":
			p.add(path+".name", errRequired)
		case fw.Name == NoWindow:
			p.addf(path+".name", "%q means no window, and cannot name one", NoWindow)
		case dup:
			p.addf(path+".name", "%q names another window already", fw.Name)
		}
		if fw.TimeZone != "" {
			loc, err := time.LoadLocation(fw.TimeZone)
			if err != nil {
				p.addf(path+".timeZone", "unknown time zone %q: %w", fw.TimeZone, err)
			} else {
				w.Location = loc
			}
		}
		switch schedule, err := ParseSchedule(fw.Schedule, w.Location); {
		case fw.Schedule == "":
			p.add(path+".schedule", errRequired)
		case err != nil:
			p.add(path+".schedule", err)
		default:
			w.schedule = schedule
		}
		checkDuration(p, path+".duration", w.Duration, minWindowDuration, maxWindowDuration)
		if fw.NamespaceSelector != "" {
			w.Namespaces = compileSelector(path+".namespaceSelector", fw.NamespaceSelector, p)
		}
		names[fw.Name] = true
		out = append(out, w)
	}
	return out
}

// ParseSchedule reads a restart window's schedule in loc, as Kubernetes'
// CronJob controller reads a CronJob's: robfig/cron's standard parser.
func ParseSchedule(spec string, loc *time.Location) (cron.Schedule, error) {
	if strings.Contains(spec, "TZ=") {
		return nil, fmt.Errorf("%q: give the time zone in timeZone, not in the schedule", spec)
	}
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("%q is not a cron schedule: %w", spec, err)
	}
	if s, ok := schedule.(*cron.SpecSchedule); ok {
		s.Location = loc
	}
	return schedule, nil
}

// WindowsSelectNamespaces reports whether a window is the default of the
// namespaces a selector selects: the controller then watches Namespaces.
func (c *Config) WindowsSelectNamespaces() bool {
	for _, w := range c.Windows {
		if w.Namespaces != nil {
			return true
		}
	}
	return false
}

// MinIntervalOf is the value of the first minimum-interval annotation of a
// workload's annotations that is set: annotations.minInterval, then
// minIntervalAnnotations in order.
func (c *Config) MinIntervalOf(annotations map[string]string) string {
	if v := annotations[c.Annotations.MinInterval]; v != "" {
		return v
	}
	for _, key := range c.MinIntervalAnnotations {
		if v := annotations[key]; v != "" {
			return v
		}
	}
	return ""
}
