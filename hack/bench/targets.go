package main

import (
	"fmt"
	"math"
	"time"
)

// target is one row of a scenario's targets table: how each scale fares.
type target struct {
	label   string
	verdict func(r *scaleRun) string
}

func targetTable(sc *scenario, runs []*scaleRun) *table {
	t := &table{}
	for _, tg := range scenarioTargets(sc, runs) {
		r := &row{label: tg.label}
		for _, res := range runs {
			r.values = append(r.values, tg.verdict(res))
		}
		t.rows = append(t.rows, r)
	}
	return t
}

// scenarioTargets are the rows of the scenario's targets, in a fixed order.
func scenarioTargets(sc *scenario, runs []*scaleRun) []target {
	tg := sc.targets
	var out []target
	if tg.peakRSSKB > 0 {
		out = append(out, target{fmt.Sprintf("Peak RSS ≤ %d MiB", tg.peakRSSKB>>10), func(r *scaleRun) string {
			hwm := ctrl(r).total.hwm
			if r.second != nil {
				hwm = max(hwm, r.second.proc.hwm)
			}
			return fmt.Sprintf("%s (%s)", mark(hwm <= tg.peakRSSKB), kbString(hwm))
		}})
	}
	if tg.rssGrowth > 0 && len(runs) > 1 {
		first := runs[0]
		out = append(out, target{fmt.Sprintf("Peak RSS within %.0f%% of ×%d", 100*tg.rssGrowth, first.scale), func(r *scaleRun) string {
			g := float64(ctrl(r).total.hwm)/float64(ctrl(first).total.hwm) - 1
			return fmt.Sprintf("%s (%+.1f%%)", mark(g <= tg.rssGrowth), 100*g)
		}})
	}
	if tg.ready {
		out = append(out, target{fmt.Sprintf("Ready within %s", targetReady), func(r *scaleRun) string {
			ready, second := ctrl(r).ready, time.Duration(0)
			if r.second != nil {
				second = r.second.ready
			}
			return fmt.Sprintf("%s (%s, %s)", mark(ready <= targetReady && second <= targetReady), sec(ready), sec(second))
		}})
	}
	if tg.singleChange {
		out = append(out, target{"One change: patched within grace + 100 ms (max)", singleChangeVerdict})
	}
	out = append(out, p99Targets(sc)...)
	out = append(out, ratioTargets(sc)...)
	if sc.large {
		out = append(out, target{fmt.Sprintf("ConfigMaps of many keys in an unrelated namespace raise peak RSS by ≤ %d MiB (fresh start; created while running)", targetLargeKB>>10),
			func(r *scaleRun) string {
				if r.large == nil {
					return "–"
				}
				return fmt.Sprintf("%s (%+.1f MiB; %+.1f MiB)", mark(largeGrowth(r.large) <= targetLargeKB),
					float64(r.large.with.hwm-r.large.without.hwm)/1024, float64(r.large.live.hwmAfter-r.large.live.hwmBefore)/1024)
			}})
	}
	return out
}

func ctrl(r *scaleRun) *programRun { return r.program(progController) }

func singleChangeVerdict(r *scaleRun) string {
	var worst time.Duration
	ok := true
	phases := []*phaseResult{ctrl(r).singles}
	if r.second != nil {
		phases = append(phases, r.second.singles)
	}
	if r.restart != nil {
		phases = append(phases, r.restart.singles)
	}
	if r.failover != nil {
		phases = append(phases, r.failover.singles)
	}
	for _, p := range phases {
		if p == nil {
			continue
		}
		st := stats(p.latencies)
		worst = max(worst, minus(st.max, p.grace))
		ok = ok && st.n > 0 && p.missing == 0 && p.updateErrs == 0 && st.max-p.grace <= targetSingleExtra
	}
	return fmt.Sprintf("%s (worst %s over grace)", mark(ok), sec(worst))
}

// fanOutOK is a fan-out without a missed change, failed update or stray
// restart, and, when each change targets its own workload, each restarted
// exactly once.
func fanOutOK(q *phaseResult) bool {
	ok := len(q.latencies) > 0 && q.missing == 0 && q.updateErrs == 0 && q.stray == 0
	if q.changes == q.deps {
		ok = ok && q.once == q.deps
	}
	return ok
}

// p99Targets has a row for each fan-out the scenario sets a p99 limit for.
func p99Targets(sc *scenario) []target {
	var out []target
	for _, n := range sc.changes {
		limit, ok := sc.targets.p99[n]
		if !ok {
			continue
		}
		out = append(out, target{fmt.Sprintf("N=%d simultaneous changes: p99 ≤ %.0f s, none missed", n, limit), func(r *scaleRun) string {
			q := ctrl(r).fanOutPhase(n)
			if q == nil {
				return "–"
			}
			st := stats(q.latencies)
			return fmt.Sprintf("%s (p99 %s)", mark(fanOutOK(q) && st.p99.Seconds() <= limit), sec(st.p99))
		}})
	}
	return out
}

// ratioTargets compare the controller with the references measured in the
// same run on the same cluster.
func ratioTargets(sc *scenario) []target {
	tg := sc.targets
	var out []target
	if tg.patcherP99 > 0 {
		for _, n := range sc.changes {
			out = append(out, target{fmt.Sprintf("N=%d simultaneous changes: p99 ≤ %.1f× the zero-logic patcher's (median of the comparisons; p50 beside)", n, tg.patcherP99),
				func(r *scaleRun) string { return patcherVerdict(r, n, tg.patcherP99) }})
		}
	}
	if tg.floorPeakRSS > 0 {
		out = append(out, target{fmt.Sprintf("Peak RSS, whole run ≤ %.1f× the floor's", tg.floorPeakRSS), func(r *scaleRun) string {
			c, f := ctrl(r), r.program(progFloor)
			x := ratioOf(float64(c.total.hwm), float64(f.hwmReady))
			return fmt.Sprintf("%s (%.2f×: %s / %s)", mark(x <= tg.floorPeakRSS), x, kbString(c.total.hwm), kbString(f.hwmReady))
		}})
	}
	if tg.floorCPUReady > 0 {
		out = append(out, target{fmt.Sprintf("CPU seconds to ready ≤ %.1f× the floor's", tg.floorCPUReady), func(r *scaleRun) string {
			c, f := ctrl(r), r.program(progFloor)
			x := ratioOf(c.cpuReady, f.cpuReady)
			return fmt.Sprintf("%s (%.2f×: %.2f s / %.2f s)", mark(x <= tg.floorCPUReady), x, c.cpuReady, f.cpuReady)
		}})
	}
	return out
}

func patcherVerdict(r *scaleRun, n int, limit float64) string {
	cmp := r.comparisons(n)
	if len(cmp) == 0 {
		return "–"
	}
	p99, p50, complete := r.fanOutRatios(n)
	if p99.n == 0 {
		return mark(false) + " (no latencies)"
	}
	ok := complete && !math.IsNaN(p99.median) && p99.median <= limit
	if len(cmp) == 1 {
		cs, zs := stats(cmp[0].ctrl.latencies), stats(cmp[0].patcher.latencies)
		return fmt.Sprintf("%s (p99 %.2f×: %s / %s; p50 %.2f×: %s / %s)", mark(ok), p99.median, sec(cs.p99), sec(zs.p99), p50.median, sec(cs.p50), sec(zs.p50))
	}
	return fmt.Sprintf("%s (p99 %s; p50 %s)", mark(ok), p99, p50)
}
