package main

import (
	"fmt"
	"slices"
	"strings"
)

// renderSlopes sets the scale scenarios run together (2.5k, 10k, 50k) side
// by side, per workload: what each costs beyond the one before it. A ratio
// to the floor at one size hides how each grows; a slope is what the
// arithmetic for a larger cluster (docs/design.md) needs.
func renderSlopes(runs []*scaleRun) string {
	var scale []*scaleRun
	for _, r := range runs {
		if _, ok := r.objs.(scaleSpec); ok && ctrl(r) != nil {
			scale = append(scale, r)
		}
	}
	if len(scale) < 2 {
		return ""
	}
	slices.SortFunc(scale, func(a, b *scaleRun) int { return a.objs.workloadCount() - b.objs.workloadCount() })
	var b strings.Builder
	b.WriteString("\n## Per-workload slopes between the scale scenarios of this run\n\n")
	b.WriteString("Each row: the figure at each size, then its growth per added workload between consecutive sizes (each workload reads three sources of its own).\n\n")
	b.WriteString("| figure |")
	for _, r := range scale {
		fmt.Fprintf(&b, " %d workloads |", r.objs.workloadCount())
	}
	for i := 1; i < len(scale); i++ {
		fmt.Fprintf(&b, " slope %d→%d |", scale[i-1].objs.workloadCount(), scale[i].objs.workloadCount())
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", 2*len(scale)-1))
	b.WriteString("\n")
	row := func(label, unit, slopeUnit string, scaleBy float64, v func(r *scaleRun) (float64, bool)) {
		fmt.Fprintf(&b, "| %s |", label)
		for _, r := range scale {
			if x, ok := v(r); ok {
				fmt.Fprintf(&b, " %.2f %s |", x, unit)
			} else {
				b.WriteString(" – |")
			}
		}
		for i := 1; i < len(scale); i++ {
			x0, ok0 := v(scale[i-1])
			x1, ok1 := v(scale[i])
			if !ok0 || !ok1 {
				b.WriteString(" – |")
				continue
			}
			dw := float64(scale[i].objs.workloadCount() - scale[i-1].objs.workloadCount())
			fmt.Fprintf(&b, " %.2f %s |", (x1-x0)/dw*scaleBy, slopeUnit)
		}
		b.WriteString("\n")
	}
	prog := func(name string, f func(p *programRun) float64) func(r *scaleRun) (float64, bool) {
		return func(r *scaleRun) (float64, bool) {
			p := r.program(name)
			if p == nil {
				return 0, false
			}
			return f(p), true
		}
	}
	mibOf := func(kb int64) float64 { return float64(kb) / 1024 }
	row("controller: peak RSS, whole run", "MiB", "KiB/workload", 1024, prog(progController, func(p *programRun) float64 { return mibOf(p.total.hwm) }))
	row("floor: peak RSS", "MiB", "KiB/workload", 1024, prog(progFloor, func(p *programRun) float64 { return mibOf(p.hwmReady) }))
	row("controller: peak RSS at ready", "MiB", "KiB/workload", 1024, prog(progController, func(p *programRun) float64 { return mibOf(p.hwmReady) }))
	row("controller: Go heap in use after sync", "MiB", "KiB/workload", 1024, prog(progController, func(p *programRun) float64 { return p.heapInuse / (1 << 20) }))
	row("floor: Go heap in use after sync", "MiB", "KiB/workload", 1024, prog(progFloor, func(p *programRun) float64 { return p.heapInuse / (1 << 20) }))
	row("controller: CPU seconds to ready", "s", "ms/workload", 1000, prog(progController, func(p *programRun) float64 { return p.cpuReady }))
	row("floor: CPU seconds to ready", "s", "ms/workload", 1000, prog(progFloor, func(p *programRun) float64 { return p.cpuReady }))
	row("controller: time to ready", "s", "ms/workload", 1000, prog(progController, func(p *programRun) float64 { return p.ready.Seconds() }))
	row("controller: first recording, CPU seconds", "s", "ms/workload", 1000, prog(progController, func(p *programRun) float64 { return p.recordCPU }))
	row("controller: one change, max latency", "s", "µs/workload", 1e6, func(r *scaleRun) (float64, bool) {
		p := ctrl(r)
		if p.singles == nil || len(p.singles.latencies) == 0 {
			return 0, false
		}
		return stats(p.singles.latencies).max.Seconds(), true
	})
	return b.String()
}
