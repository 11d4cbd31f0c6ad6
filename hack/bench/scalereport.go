package main

import (
	"fmt"
	"strings"
	"time"
)

// Targets of the scale scenario.
const (
	targetFloorRatio = 1.3 // peak RSS within 1.3× the floor
	targetZeroRatio  = 1.5 // 1,000 changes p99 within 1.5× the zero-logic patcher
)

func renderScaleReport(o options, r *scaleFigures, began time.Time) string {
	var b strings.Builder
	s := r.spec
	fmt.Fprintf(&b, "## Scale run of %s UTC\n\n", began.UTC().Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, "- Controller %s (%s); machine: %s.\n", o.controllerPath, o.version, machine())
	fmt.Fprintf(&b, "- %d opted-in workloads (%d Deployments, %d StatefulSets, %d DaemonSets; no pods) over %d ConfigMaps and %d Secrets in %d namespaces; objects created in %s.\n",
		s.workloads, countKind(s, "deployments"), countKind(s, "statefulsets"), countKind(s, "daemonsets"), s.configMaps(), s.secrets(), scaleNamespaces, r.createDur.Round(time.Second))
	fmt.Fprintf(&b, "- Controller flags: grace 0 %s; env %s.\n", strings.Join(o.controllerArgs, " "), strings.Join(o.controllerEnv, " "))
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n")

	t := &table{}
	set := func(label string, vals ...string) {
		for i, v := range vals {
			t.set(i, 4, label, v)
		}
	}
	c, fl, z := r.ctrl, r.floor, r.zero
	ratio := func(a, b float64) string {
		if b <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	set("Time to ready (start → caches synced)", sec(c.ready), sec(fl.ready), sec(z.ready), ratio(c.ready.Seconds(), fl.ready.Seconds())+" floor")
	set("CPU seconds to ready", fmt.Sprintf("%.2f s", c.cpu), fmt.Sprintf("%.2f s", fl.cpu), fmt.Sprintf("%.2f s", z.cpu), ratio(c.cpu, fl.cpu)+" floor")
	set("Peak RSS at ready (VmHWM)", kbString(c.hwmReady), kbString(fl.hwm), kbString(z.hwm), ratio(float64(c.hwmReady), float64(fl.hwm))+" floor")
	set("**Peak RSS, whole run (VmHWM)**", "**"+kbString(c.total.hwm)+"**", kbString(fl.total.hwm), kbString(z.total.hwm), "**"+ratio(float64(c.total.hwm), float64(fl.hwm))+" floor**")
	set("Steady RSS (idle after sync; controller: after recording every workload)", kbString(c.steady), kbString(fl.steady), kbString(z.steady), ratio(float64(c.steady), float64(fl.steady))+" floor")
	set("Controller's steady RSS: anonymous / file-backed (the binary)", fmt.Sprintf("%s / %s", kbString(c.anon), kbString(c.file)), "–", "–", "–")
	set("Controller's steady memory as the Go runtime sees it", c.goMem, "–", "–", "–")
	set("Go heap in use after sync (after GC)", mib(c.heapInuse), mib(fl.heapInuse), mib(z.heapInuse), ratio(c.heapInuse, fl.heapInuse)+" floor")
	set("Initial recording: workloads / time after ready / CPU seconds", fmt.Sprintf("%d / %s / %.2f s", c.recorded, sec(c.recordDur), c.recordCPU), "–", "–", "–")
	phaseRowsScale(set, "One change at a time", r.ctrlSingles, r.zeroSingles)
	phaseRowsScale(set, fmt.Sprintf("%d simultaneous changes", o.scaleChanges), r.ctrlFanOut, r.zeroFanOut)
	set("CPU seconds, whole process", fmt.Sprintf("%.2f s", c.total.cpu), fmt.Sprintf("%.2f s", fl.total.cpu), fmt.Sprintf("%.2f s", z.total.cpu), "–")
	t.write(&b, "Figure", []string{"restart-controller", "floor (stripped informers)", "zero-logic patcher", "ratio"})

	b.WriteString("\n| Target | result |\n|---|---|\n")
	peak := float64(c.total.hwm) / float64(max(fl.hwm, 1))
	fmt.Fprintf(&b, "| Peak RSS ≤ %.1f× the floor | %s (%.2f×: %s / %s) |\n", targetFloorRatio, mark(peak <= targetFloorRatio), peak, kbString(c.total.hwm), kbString(fl.hwm))
	if r.ctrlFanOut != nil && r.zeroFanOut != nil {
		cp, zp := stats(r.ctrlFanOut.latencies).p99, stats(r.zeroFanOut.latencies).p99
		ok := cp != noData && zp != noData && r.ctrlFanOut.missing == 0 && float64(cp) <= targetZeroRatio*float64(zp)
		fmt.Fprintf(&b, "| %d simultaneous changes: p99 ≤ %.1f× the zero-logic patcher | %s (%s: %s / %s) |\n", o.scaleChanges, targetZeroRatio, mark(ok),
			ratio(cp.Seconds(), zp.Seconds()), sec(cp), sec(zp))
	}
	if r.ctrlSingles != nil {
		m := stats(r.ctrlSingles.latencies).max
		ok := m != noData && r.ctrlSingles.missing == 0 && m <= targetSingleExtra
		fmt.Fprintf(&b, "| One change acted on within grace (0) + 100 ms, fleet idle | %s (max %s, n=%d) |\n", mark(ok), sec(m), len(r.ctrlSingles.latencies))
	}
	for _, p := range []struct{ name, top string }{{"CPU profile of the start-up (sync and initial recording)", r.cpuSync}, {"CPU profile of the fan-out", r.cpuFanOut}, {"Heap after sync (peak over target)", r.heapTop}} {
		if p.top != "" {
			fmt.Fprintf(&b, "\n<details><summary>%s</summary>\n\n```\n%s```\n</details>\n", p.name, p.top)
		}
	}
	return b.String()
}

func phaseRowsScale(set func(string, ...string), name string, c, z *scalePhase) {
	if c == nil || z == nil {
		return
	}
	cs, zs := stats(c.latencies), stats(z.latencies)
	lat := func(s pct) string {
		return fmt.Sprintf("%s / %s / %s / %s", sec(s.p50), sec(s.p90), sec(s.p99), sec(s.max))
	}
	r := "–"
	if cs.p99 != noData && zs.p99 > 0 {
		r = fmt.Sprintf("p50 %.2f×, p99 %.2f× zero-logic", cs.p50.Seconds()/zs.p50.Seconds(), cs.p99.Seconds()/zs.p99.Seconds())
	}
	set(name+": latency p50 / p90 / p99 / max (n)", fmt.Sprintf("%s (%d)", lat(cs), cs.n), "–", fmt.Sprintf("%s (%d)", lat(zs), zs.n), r)
	set(name+": updates issued over", sec(c.issueSpan), "–", sec(z.issueSpan), "–")
	fate := func(p *scalePhase) string {
		return fmt.Sprintf("%d / %d / %d / %d / %d", p.changes, p.restarts, p.extra, p.missing, p.stray)
	}
	set(name+": changes / restarts / extra / missing / stray", fate(c), "–", fate(z), "–")
	set(name+": CPU seconds (first update → quiet)", fmt.Sprintf("%.2f s", c.cpu), "–", fmt.Sprintf("%.2f s", z.cpu), "–")
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func countKind(s scaleSpec, resource string) int {
	n := 0
	for i := range s.workloads {
		if wlResource(i) == resource {
			n++
		}
	}
	return n
}
