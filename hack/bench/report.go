package main

import (
	"fmt"
	"math"
	"os/exec"
	"strings"
	"time"
)

// Targets of the issue (2-core machine).
const (
	targetRSSKB       = 64 << 10 // 64 MiB
	targetRSSGrowth   = 0.10     // peak RSS with configs ×4 within 10% of ×1
	targetReady       = 10 * time.Second
	targetSingleExtra = 100 * time.Millisecond // one change: grace + 100 ms
	targetP99Small    = 2 * time.Second        // N=200
	targetP99Large    = 6 * time.Second        // N=1000
	smallN, largeN    = 200, 1000
)

func kbString(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

// noData stands for a figure without samples.
const noData = time.Duration(math.MinInt64)

func sec(d time.Duration) string {
	if d == noData {
		return "–"
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

type row struct {
	label  string
	values []string
}

type table struct{ rows []*row }

func (t *table) set(col, ncols int, label, value string) {
	for _, r := range t.rows {
		if r.label == label {
			r.values[col] = value
			return
		}
	}
	r := &row{label: label, values: make([]string, ncols)}
	r.values[col] = value
	t.rows = append(t.rows, r)
}

func renderReport(o options, results []*scaleResult, began time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Benchmark run of %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %s\n", machine())
	fmt.Fprintf(&b, "- Controller: `%s` (%s), config `%s`, extra flags: `%s`, extra env: `%s`; extra kube-apiserver flags: `%s`\n",
		o.controllerPath, o.version, o.configFile, strings.Join(o.controllerArgs, " "), strings.Join(o.controllerEnv, " "), strings.Join(o.apiserverArgs, " "))
	fmt.Fprintf(&b, "- Scenario: %d ConfigMaps × %d kB and %d Secrets × %d kB (10 keys each, random data) at scale ×1; %d Deployments (replicas 0) each reading 2 ConfigMaps (volume; env configMapKeyRef) and 2 Secrets (envFrom; projected items)\n",
		o.configMaps, o.configMapKB, o.secrets, o.secretKB, o.deployments)
	fmt.Fprintf(&b, "- Config changes: %s\n", map[string]string{
		"put":         "unconditional update of the whole object, new random data in every key, protobuf (`--update put`)",
		"merge-patch": "JSON merge patch of key k0 (`--update merge-patch`)",
	}[o.update])
	fmt.Fprintf(&b, "- Whole run: %s\n", time.Since(began).Round(time.Second))
	clean := true
	for _, r := range results {
		if r.others != "" {
			clean = false
			fmt.Fprintf(&b, "- **Warning**: other heavy processes ran during scale ×%d (%s); its figures are slowed by them\n", r.scale, r.others)
		}
	}
	if clean {
		b.WriteString("- No other cluster or test process ran during the benchmark\n")
	}
	b.WriteString("\n")

	t := &table{}
	n := len(results)
	for col, r := range results {
		set := func(label, format string, args ...any) { t.set(col, n, label, fmt.Sprintf(format, args...)) }
		set("Config data", "%.0f MB", float64(r.configBytes)/1e6)
		set("Objects created in (set-up, not the controller)", "%.1f s", r.createDur.Seconds())
		set("Time to ready (start → caches synced: /readyz 200 and restart_controller_ready 1)", "%s", sec(r.ready1))
		set("First /readyz 200 after start", "%s", sec(r.readyz1))
		set("CPU seconds to ready", "%.2f s", r.cpuReady1)
		if o.compareDecode {
			set("For comparison: protobuf typed informers sync the same configs in (bench process)", "%s, %.2f CPU s", sec(r.protoWall), r.protoCPU)
		}
		set("Peak RSS at ready (VmHWM)", "%s", kbString(r.hwmReady1))
		set("Initial recording: Deployments annotated / time after ready", "%d / %s", r.recorded, sec(r.recordDur))
		set("Initial recording: PATCHes / restarts", "%.0f / %d", r.recordWrites, r.firstRestart)
		set("Go heap in use after sync (after GC)", "%.1f MiB", r.heapInuse/(1<<20))
		for _, p := range r.phases {
			phaseRows(set, p, o.updaters)
		}
		set("**Peak RSS, whole run (VmHWM)**", "**%s**", kbString(r.hwm1))
		set("Max sampled RSS (200 ms) / RSS at end", "%s / %s", kbString(r.sampled1), kbString(r.rss1))
		set("RSS at end: anonymous (Go heap, stacks) / file-backed (mapped binary)", "%s / %s", kbString(r.anon1), kbString(r.file1))
		set("CPU seconds, whole run", "%.2f s", r.cpu1)
		set(fmt.Sprintf("Second start (grace %s): time to ready / first /readyz 200", o.grace), "%s / %s", sec(r.ready2), sec(r.readyz2))
		set(fmt.Sprintf("Second start (grace %s): PATCHes at start-up", o.grace), "%.0f", r.writes2)
		if p := r.graceSingles; p != nil {
			st := stats(p.latencies)
			lbl := fmt.Sprintf("One change, grace %s: latency − grace p50 / max (n=%d)", o.grace, p.changes)
			set(lbl, "%s / %s", sec(minus(st.p50, p.grace)), sec(minus(st.max, p.grace)))
			set(fmt.Sprintf("One change, grace %s: restarts / changes", o.grace), "%d / %d%s", p.restarts, p.changes, missingNote(p))
		}
		set(fmt.Sprintf("Second start (grace %s): peak RSS / CPU seconds", o.grace), "%s / %.2f s", kbString(r.hwm2), r.cpu2)
	}
	b.WriteString("| Figure |")
	for _, r := range results {
		fmt.Fprintf(&b, " configs ×%d |", r.scale)
	}
	b.WriteString("\n|---|")
	for range results {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		fmt.Fprintf(&b, "| %s |", r.label)
		for _, v := range r.values {
			fmt.Fprintf(&b, " %s |", v)
		}
		b.WriteString("\n")
	}

	b.WriteString("\n### Targets\n\n| Target |")
	for _, r := range results {
		fmt.Fprintf(&b, " ×%d |", r.scale)
	}
	b.WriteString("\n|---|")
	for range results {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	target := func(label string, f func(r *scaleResult) string) {
		fmt.Fprintf(&b, "| %s |", label)
		for _, r := range results {
			fmt.Fprintf(&b, " %s |", f(r))
		}
		b.WriteString("\n")
	}
	target("Peak RSS ≤ 64 MiB", func(r *scaleResult) string {
		return fmt.Sprintf("%s (%s)", mark(r.hwm1 <= targetRSSKB && r.hwm2 <= targetRSSKB), kbString(max(r.hwm1, r.hwm2)))
	})
	if len(results) > 1 {
		first := results[0]
		target(fmt.Sprintf("Peak RSS within 10%% of ×%d", first.scale), func(r *scaleResult) string {
			g := float64(r.hwm1)/float64(first.hwm1) - 1
			return fmt.Sprintf("%s (%+.1f%%)", mark(g <= targetRSSGrowth), 100*g)
		})
	}
	target("Ready within 10 s", func(r *scaleResult) string {
		return fmt.Sprintf("%s (%s, %s)", mark(r.ready1 <= targetReady && r.ready2 <= targetReady), sec(r.ready1), sec(r.ready2))
	})
	target("One change: patched within grace + 100 ms (max)", func(r *scaleResult) string {
		var worst time.Duration
		ok := true
		for _, p := range append([]*phaseResult{r.phases[0]}, r.graceSingles) {
			if p == nil {
				continue
			}
			st := stats(p.latencies)
			worst = max(worst, minus(st.max, p.grace))
			ok = ok && st.n > 0 && p.missing == 0 && p.updateErrs == 0 && st.max-p.grace <= targetSingleExtra
		}
		return fmt.Sprintf("%s (worst %s over grace)", mark(ok), sec(worst))
	})
	for _, p := range results[0].phases {
		var limit time.Duration
		switch {
		case strings.HasPrefix(p.name, fmt.Sprintf("N=%d ", smallN)):
			limit = targetP99Small
		case strings.HasPrefix(p.name, fmt.Sprintf("N=%d ", largeN)):
			limit = targetP99Large
		default:
			continue
		}
		name := p.name
		extra := ""
		if p.changes == p.deps {
			extra = ", every Deployment restarted exactly once"
		}
		target(fmt.Sprintf("%s: p99 ≤ %s%s", strings.TrimSuffix(name, ", grace 0"), sec(limit), extra), func(r *scaleResult) string {
			for _, q := range r.phases {
				if q.name != name {
					continue
				}
				st := stats(q.latencies)
				ok := st.n > 0 && st.p99 <= limit && q.missing == 0 && q.updateErrs == 0 && q.stray == 0
				if q.changes == q.deps {
					ok = ok && q.once == q.deps
				}
				return fmt.Sprintf("%s (p99 %s)", mark(ok), sec(st.p99))
			}
			return "–"
		})
	}
	for _, r := range results {
		if r.cpuProfile != "" {
			fmt.Fprintf(&b, "\n### CPU profile of the first %s after start (the sync), configs ×%d\n\n```\n%s```\n", o.cpuProfileSync, r.scale, r.cpuProfile)
		}
		if r.profile != "" {
			fmt.Fprintf(&b, "\n### Heap profile after sync, configs ×%d (peak RSS over target)\n\n```\n%s```\n", r.scale, r.profile)
		}
	}
	return b.String()
}

func missingNote(p *phaseResult) string {
	var notes []string
	if p.missing > 0 {
		notes = append(notes, fmt.Sprintf("%d changes never restarted", p.missing))
	}
	if p.updateErrs > 0 {
		notes = append(notes, fmt.Sprintf("%d updates failed", p.updateErrs))
	}
	if p.stray > 0 {
		notes = append(notes, fmt.Sprintf("%d restarts of untouched Deployments", p.stray))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

func phaseRows(set func(label, format string, args ...any), p *phaseResult, updaters int) {
	st := stats(p.latencies)
	short := strings.TrimSuffix(p.name, ", grace 0")
	if p.changes <= 20 && !strings.HasPrefix(p.name, "N=") {
		set(short+" (grace 0): latency p50 / max (n="+fmt.Sprint(p.changes)+")", "%s / %s", sec(st.p50), sec(st.max))
		set(short+" (grace 0): update call returned p50", "%s", sec(stats(p.returned).p50))
		set(short+" (grace 0): restarts / changes", "%d / %d%s", p.restarts, p.changes, missingNote(p))
		return
	}
	set(short+": latency p50 / p90 / p99 / max", "%s / %s / %s / %s", sec(st.p50), sec(st.p90), sec(st.p99), sec(st.max))
	sd := stats(p.sinceDone)
	set(short+": latency from update returned p50 / p99 / max", "%s / %s / %s", sec(sd.p50), sec(sd.p99), sec(sd.max))
	set(short+": update calls returned p50 / max", "%s / %s", sec(stats(p.returned).p50), sec(stats(p.returned).max))
	set(fmt.Sprintf("%s: updates issued over (first → last issued, %d at a time)", short, updaters), "%s", sec(p.issueSpan))
	set(short+": last restart seen after first update / controller CPU seconds", "%s / %.2f s", sec(p.wall), p.cpu)
	set(short+": restarts / changes (Deployments)", "%d / %d (%d)%s", p.restarts, p.changes, p.deps, missingNote(p))
	set(short+": Deployments restarted exactly once", "%d / %d (max %d each)", p.once, p.deps, p.maxPerDep)
	perRestart := "–"
	if p.restarts > 0 {
		perRestart = fmt.Sprintf("%.2f", p.patches/float64(p.restarts))
	}
	set(short+": PATCHes per restart (conflicts)", "%s (%.0f)", perRestart, p.conflicts)
	set(short+": controller's PATCH call, mean duration", "%s", sec(p.patchMean))
}

// controllerVersion is what the binary reports with --version (main.version
// is set by `make build` from git describe).
func controllerVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "version unknown"
	}
	return strings.TrimSpace(string(out))
}

func minus(d, by time.Duration) time.Duration {
	if d == noData {
		return noData
	}
	return d - by
}
