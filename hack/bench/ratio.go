package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// A fan-out's latency on this 2-core machine depends on what the API
// server, etcd and kube-controller-manager do at that moment as much as on
// the program measured: one controller run against one patcher run moved
// between 1.02x and 1.58x with the same binaries. So the controller is
// compared with the patcher several times, each time on one cluster (the
// default scenario: a fresh cluster per pair; the large scenarios: the
// patcher before and after the controller), and the ratio reported is the
// median of those comparisons, with their spread.

// comparison is one controller fan-out beside one patcher fan-out of the
// same N, on the same cluster.
type comparison struct {
	where         string // "run" (the scale's full run) or "pair N"
	patcherFirst  bool
	ctrl, patcher *phaseResult
}

// ratios are the p99 and p50 ratios of a comparison; ok is false when
// either side has no latency.
func (c comparison) ratios() (p99, p50 float64, ok bool) {
	cs, zs := stats(c.ctrl.latencies), stats(c.patcher.latencies)
	if cs.n == 0 || zs.n == 0 {
		return 0, 0, false
	}
	return ratioOf(cs.p99.Seconds(), zs.p99.Seconds()), ratioOf(cs.p50.Seconds(), zs.p50.Seconds()), true
}

func (c comparison) order() string {
	if c.patcherFirst {
		return "patcher, then controller"
	}
	return "controller, then patcher"
}

// comparisons pairs, on each cluster of the scale, each of the
// controller's fan-outs of n changes with those of the patcher runs right
// before and after it.
func (r *scaleRun) comparisons(n int) []comparison {
	var out []comparison
	add := func(where string, runs []*programRun) {
		round := 0
		for ci, ctrl := range runs {
			if ctrl.prog != progController {
				continue
			}
			round++
			label := where
			if round > 1 {
				label = fmt.Sprintf("%s, controller %d", where, round)
			}
			c := ctrl.fanOutPhase(n)
			for _, i := range []int{ci - 1, ci + 1} {
				if i < 0 || i >= len(runs) || runs[i].prog != progPatcher {
					continue
				}
				if z := runs[i].fanOutPhase(n); c != nil && z != nil {
					out = append(out, comparison{where: label, patcherFirst: i < ci, ctrl: c, patcher: z})
				}
			}
		}
	}
	add("run", r.runs)
	for _, p := range r.pairs {
		add(fmt.Sprintf("pair %d", p.n), p.runs)
	}
	return out
}

// spread is a median and the range around it.
type spread struct {
	n                int
	median, min, max float64
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{median: math.NaN(), min: math.NaN(), max: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{n: len(s), median: m, min: s[0], max: s[len(s)-1]}
}

// String is "1.25×" for one figure, "1.25× (3: 1.10–1.60×)" for several.
func (s spread) String() string {
	if s.n <= 1 {
		return fmt.Sprintf("%.2f×", s.median)
	}
	return fmt.Sprintf("%.2f× (median of %d: %.2f–%.2f×)", s.median, s.n, s.min, s.max)
}

// fanOutRatios are the spreads of the p99 and p50 ratios of every
// comparison of the fan-out of n, and whether every controller fan-out in
// them was complete (fanOutOK).
func (r *scaleRun) fanOutRatios(n int) (p99, p50 spread, complete bool) {
	var a, b []float64
	complete = true
	seen := map[*phaseResult]bool{}
	for _, c := range r.comparisons(n) {
		if !seen[c.ctrl] {
			seen[c.ctrl] = true
			complete = complete && fanOutOK(c.ctrl) && c.ctrl.missing == 0
		}
		if x, y, ok := c.ratios(); ok {
			a, b = append(a, x), append(b, y)
		} else {
			complete = false
		}
	}
	return spreadOf(a), spreadOf(b), complete && len(a) > 0
}

// writeComparisons renders every comparison of the scenario's fan-outs,
// when some scale has more than one.
func writeComparisons(b *strings.Builder, sc *scenario, runs []*scaleRun) {
	several := false
	for _, r := range runs {
		for _, n := range sc.changes {
			several = several || len(r.comparisons(n)) > 1
		}
	}
	if !several {
		return
	}
	b.WriteString("\n### Fan-out beside the zero-logic patcher, every comparison\n\n")
	b.WriteString("Each row is one controller run and one patcher run of the same changes on the same cluster; the target is checked on the median of the ratios.\n\n")
	b.WriteString("The last column is the p99 from the update call's return to the restart seen, over the patcher's: on a loaded machine the API server's answer to the update itself can take seconds, alike for both programs, and that part is not theirs.\n\n")
	b.WriteString("| scale | cluster | order | N | controller p50 / p99 | patcher p50 / p99 | p99 ratio | p50 ratio | p99 from update returned: controller / patcher (ratio) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		for _, n := range sc.changes {
			for _, c := range r.comparisons(n) {
				cs, zs := stats(c.ctrl.latencies), stats(c.patcher.latencies)
				p99, p50, ok := c.ratios()
				ratio := func(x float64) string {
					if !ok {
						return "–"
					}
					return fmt.Sprintf("%.2f×", x)
				}
				cd, zd := stats(c.ctrl.sinceDone), stats(c.patcher.sinceDone)
				fmt.Fprintf(b, "| ×%d | %s | %s | %d | %s / %s | %s / %s | %s | %s | %s / %s (%.2f×) |\n", r.scale, c.where, c.order(), n,
					sec(cs.p50), sec(cs.p99), sec(zs.p50), sec(zs.p99), ratio(p99), ratio(p50), sec(cd.p99), sec(zd.p99), ratioOf(cd.p99.Seconds(), zd.p99.Seconds()))
			}
			p99, p50, _ := r.fanOutRatios(n)
			fmt.Fprintf(b, "| ×%d | **median** | | %d | | | **%.2f×** (%.2f–%.2f×) | %.2f× (%.2f–%.2f×) | |\n",
				r.scale, n, p99.median, p99.min, p99.max, p50.median, p50.min, p50.max)
		}
	}
}
