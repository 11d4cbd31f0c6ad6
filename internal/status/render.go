package status

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/internal/explain"
)

// FormatWide is status's output format beside explain's: the tables with
// every restart, and their sources and releases.
const FormatWide = "wide"

// CheckFormat returns an error for an unknown -o value.
func CheckFormat(format string) error {
	switch format {
	case explain.FormatTable, FormatWide, explain.FormatJSON, explain.FormatYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use wide, json or yaml, or leave -o out for tables", format)
}

// rowsPerReason is how many restarts of one reason the tables show; wide
// shows them all. A fleet-wide hold has thousands, and their reason, end
// and release are the change's, shown once above.
const rowsPerReason = 20

// Render writes the report in the format.
func Render(w io.Writer, r *Report, format string) error {
	if format == explain.FormatJSON || format == explain.FormatYAML {
		return explain.WriteStructured(w, r, format)
	}
	var b strings.Builder
	wide := format == FormatWide
	renderController(&b, r)
	renderCounts(&b, r)
	renderChanges(&b, r)
	renderRestarts(&b, r, wide)
	renderRollouts(&b, r)
	if len(r.NotRead) > 0 {
		fmt.Fprintln(&b, "\nNot read:")
		for _, s := range r.NotRead {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(&b, "\nNotes:")
		for _, s := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func stamp(t time.Time) string { return t.Format(time.RFC3339) }

func renderController(w io.Writer, r *Report) {
	c := r.Controller
	if c == nil {
		return
	}
	leader := "leader election is off in the config: one instance runs, without a Lease"
	switch {
	case !c.LeaderElection:
	case c.LeaseError != "":
		leader = "unknown: " + c.LeaseError
	case c.Holder == "":
		leader = "none: the Lease " + c.Lease + " has no holder"
	default:
		leader = c.Holder + " (Lease " + c.Lease
		if c.RenewTime != nil {
			leader += ", renewed " + ago(r.Time, *c.RenewTime) + " ago"
		}
		if c.AcquireTime != nil {
			leader += ", leading for " + ago(r.Time, *c.AcquireTime)
		}
		leader += ")"
		if c.Expired {
			leader += "; expired: no replica has renewed it in time, none leads now"
		}
	}
	health := "unknown: metrics not reached (" + c.MetricsError + ")"
	if m := c.Metrics; m != nil {
		var parts []string
		parts = append(parts, gaugeText(m.Ready, "ready", "not ready (caches not synced)"), gaugeText(m.Leader, "leading", "not leading (a standby)"))
		for _, d := range m.Degraded {
			parts = append(parts, "degraded: "+d)
		}
		parts = append(parts, "held: "+countsText(m.Held), "waiting: "+countsText(m.Waiting))
		health = strings.Join(parts, "; ") + "\n  (metrics of " + m.From + ")"
	}
	fmt.Fprintf(w, "Leader:  %s\nHealth:  %s\n", leader, health)
}

func gaugeText(v *bool, yes, no string) string {
	switch {
	case v == nil:
		return yes + ": unknown"
	case *v:
		return yes
	}
	return no
}

// countsText is "breaker 1, wave 19", by label.
func countsText(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %g", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// ago is a duration to now, to the second.
func ago(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() }

func renderCounts(w io.Writer, r *Report) {
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(r.Workloads.Actions)) {
		parts = append(parts, fmt.Sprintf("%s %d", a, r.Workloads.Actions[a]))
	}
	line := fmt.Sprintf("Read:    %d opted-in workloads in %s, at %s", r.Workloads.OptedIn, r.Scope, stamp(r.Time))
	if len(parts) > 0 {
		line += "; the controller would now: " + strings.Join(parts, ", ")
	}
	fmt.Fprintln(w, line)
}

func renderChanges(w io.Writer, r *Report) {
	fmt.Fprintln(w)
	if len(r.Changes) == 0 {
		fmt.Fprintln(w, "No source change in progress.")
		return
	}
	fmt.Fprintln(w, "Changes in progress:")
	for _, ch := range r.Changes {
		fmt.Fprintf(w, "  %s\n", ChangeLine(ch))
	}
}

// ChangeLine says where a change stands, on one line: "configmap/shop/app
// change 3f2a…: wave 2 of 4, 3 of 8 restarted, 1 failed: CAUSE, 5 held
// since T; release: COMMAND".
func ChangeLine(ch Change) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s change %s: ", ch.Source, ch.Change)
	if ch.Paced {
		fmt.Fprintf(&b, "wave %d of %d, ", ch.Wave, ch.Waves)
	} else {
		b.WriteString("not paced, ")
	}
	fmt.Fprintf(&b, "%d of %d restarted", ch.Restarted, ch.Reach)
	if ch.InFlight > 0 {
		fmt.Fprintf(&b, ", %d rolling out", ch.InFlight)
	}
	if ch.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", ch.Failed)
	}
	if ch.Released {
		b.WriteString(" (released: failures no longer halt it)")
	}
	if ch.Elsewhere > 0 {
		fmt.Fprintf(&b, ", %d held for another reason", ch.Elsewhere)
	}
	if ch.Waiting > 0 {
		fmt.Fprintf(&b, ", %d waiting for their restart window or minimum interval", ch.Waiting)
	}
	if ch.Halted {
		fmt.Fprintf(&b, ": %s; %d held", ch.Cause, ch.Held)
		if ch.HeldSince != nil {
			fmt.Fprintf(&b, " since %s", stamp(*ch.HeldSince))
		}
		fmt.Fprintf(&b, "; release: %s", ch.Release)
	}
	return b.String()
}

// shortEnd is what ends a restart's stop, as the table has room for.
func shortEnd(rs Restart) string {
	switch rs.Reason {
	case ReasonWaveHalted:
		return "recovery, a new change or a release (see its change)"
	case ReasonBreaker:
		return "its sources still for the quiet time (timed by the controller)"
	case ReasonWindow, ReasonMinInterval:
		if rs.Until != nil {
			return stamp(*rs.Until)
		}
	case ReasonWave:
		return "its place in the wave"
	case ReasonDue:
		return "now, or after its grace period"
	}
	return rs.Ends
}

func renderRestarts(w io.Writer, r *Report, wide bool) {
	fmt.Fprintln(w)
	if len(r.Restarts) == 0 {
		fmt.Fprintln(w, "No restart held, waiting or due.")
		return
	}
	fmt.Fprintln(w, "Restarts held, waiting or due, by reason:")
	header := []string{"REASON", "WORKLOAD", "SINCE", "ENDS"}
	if wide {
		header = []string{"REASON", "WORKLOAD", "SINCE", "SOURCES", "ENDS", "RELEASE"}
	}
	t := explain.NewTable(w, header...)
	for i := 0; i < len(r.Restarts); {
		reason := r.Restarts[i].Reason
		j := i
		for j < len(r.Restarts) && r.Restarts[j].Reason == reason {
			j++
		}
		shown := r.Restarts[i:j]
		if !wide && len(shown) > rowsPerReason {
			shown = shown[:rowsPerReason]
		}
		for _, rs := range shown {
			since := ""
			if rs.Since != nil {
				since = stamp(*rs.Since)
			}
			if wide {
				t.Row(rs.Reason, rs.Workload, since, strings.Join(rs.Sources, ","), rs.Ends, rs.Release)
			} else {
				t.Row(rs.Reason, rs.Workload, since, shortEnd(rs))
			}
		}
		if more := j - i - len(shown); more > 0 {
			t.Row(reason, fmt.Sprintf("... and %d more (-o wide lists them all)", more), "", "")
		}
		i = j
	}
	t.Flush()
}

func renderRollouts(w io.Writer, r *Report) {
	fmt.Fprintln(w)
	if len(r.Rollouts) == 0 {
		fmt.Fprintln(w, "No rollout in flight or failed.")
		return
	}
	fmt.Fprintln(w, "Rollouts in flight or failed:")
	t := explain.NewTable(w, "WORKLOAD", "RESTARTED", "RESULT", "DEADLINE", "SOURCES")
	for _, ro := range r.Rollouts {
		result := ro.Result
		if ro.Reason != "" {
			result += " (" + ro.Reason + ")"
		}
		deadline := ""
		if ro.Deadline != nil {
			deadline = stamp(*ro.Deadline)
		}
		t.Row(ro.Workload, stamp(ro.At), result, deadline, strings.Join(ro.Sources, ","))
	}
	t.Flush()
}
