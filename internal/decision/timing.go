package decision

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/internal/config"
)

// timing is when the workload's restarts may happen: its restart window
// (nil: any time) and the least time between two of its restarts. problems
// say which of its annotations name no window or no interval: it then
// restarts as if they were absent, never never.
type timing struct {
	window   *config.Window
	interval time.Duration
	problems []string
}

// timingOf reads the workload's window and minimum interval: its
// annotations, else its namespace's window (by the namespace's labels,
// Snapshot.Namespace) and its kind's interval.
func (r Rules) timingOf(w Workload, s Snapshot) timing {
	var t timing
	picks := w.State.Picked()
	name := picks.Window
	if name != "" && name != config.NoWindow {
		if i := slices.IndexFunc(r.Windows, func(win config.Window) bool { return win.Name == name }); i >= 0 {
			t.window = &r.Windows[i]
		} else {
			known := make([]string, len(r.Windows))
			for i, win := range r.Windows {
				known[i] = win.Name
			}
			t.problems = append(t.problems, fmt.Sprintf("the annotation %s names no restart window: %q (known: %s); "+
				"it restarts as if it named none", r.Annotations.Window, name, strings.Join(known, ", ")))
			name = ""
		}
	}
	if name == "" && s.Namespace != nil {
		for i := range r.Windows {
			if sel := r.Windows[i].Namespaces; sel != nil && sel.Matches(s.Namespace) {
				t.window = &r.Windows[i]
				break
			}
		}
	}
	t.interval = r.Kinds[s.Key.Resource].MinInterval
	if picks.MinInterval != "" {
		d, err := time.ParseDuration(picks.MinInterval)
		if err != nil || d < 0 {
			t.problems = append(t.problems, fmt.Sprintf("its minimum interval %q is not a duration such as \"10m\"; "+
				"it restarts as if it had none of its own", picks.MinInterval))
		} else {
			t.interval = d
		}
	}
	return t
}

// closed says, when the workload's restart may not happen at now, until
// when and why; ok is false when it may.
func (t timing) closed(last *time.Time, now time.Time) (until time.Time, why string, gate Gate) {
	if t.window != nil {
		if open, opens, _ := t.window.At(now); !open {
			return opens, fmt.Sprintf("waits for its restart window %s, which opens at %s", t.window.Name,
				opens.In(t.window.Location).Format(time.RFC3339)), GateWindow
		}
	}
	if last != nil && t.interval > 0 && now.Before(last.Add(t.interval)) {
		next := last.Add(t.interval)
		return next, fmt.Sprintf("its minimum interval is %s since its last restart at %s: next restart not before %s",
			t.interval, last.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339)), GateMinInterval
	}
	return time.Time{}, "", ""
}

// timingGate: a restart outside the workload's restart window waits for its
// next opening, and one less than its minimum interval after its last
// restart waits for the interval's end; changes merged meanwhile go out in
// one restart then. A change released on its source goes now.
func timingGate(which Gate) gate {
	return func(r Rules, d *due, v Verdict) *Verdict {
		s := d.s
		for _, dl := range v.deliveries {
			if src := s.Sources[dl.id]; dl.due && src.Annotations[r.Annotations.Release] == dl.change {
				return nil
			}
		}
		var last *time.Time
		if rec := s.Workload.LastRestart; rec != nil {
			last = &rec.At
		}
		until, why, closedBy := v.timing.closed(last, s.Now)
		if closedBy != which {
			return nil
		}
		v.Action, v.Until = Wait, until
		v.Unhold = r.holdsNothing(s)
		v.Reasons = append(v.Reasons, why)
		return &v
	}
}
