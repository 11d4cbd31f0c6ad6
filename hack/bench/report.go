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
	targetRSSGrowth   = 0.10     // peak RSS with sources ×4 within 10% of ×1
	targetReady       = 10 * time.Second
	targetSingleExtra = 100 * time.Millisecond // one change: grace + 100 ms
	targetP99Small    = 2 * time.Second        // N=200
	targetP99Large    = 6 * time.Second        // N=1000
	targetLargeKB     = 5 << 10                // large sources in an unrelated namespace add ≤ 5 MiB
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

// write renders the table in Markdown under a header row of corner and the
// column titles.
func (t *table) write(b *strings.Builder, corner string, titles []string) {
	fmt.Fprintf(b, "| %s |", corner)
	for _, title := range titles {
		fmt.Fprintf(b, " %s |", title)
	}
	b.WriteString("\n|---|")
	for range titles {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		fmt.Fprintf(b, "| %s |", r.label)
		for _, v := range r.values {
			fmt.Fprintf(b, " %s |", v)
		}
		b.WriteString("\n")
	}
}

// column fills one scale's column of a table; a row a scale lacks stays empty.
type column struct {
	t          *table
	col, ncols int
}

func (c column) set(label, format string, args ...any) {
	c.t.set(c.col, c.ncols, label, fmt.Sprintf(format, args...))
}

func scaleTitles(results []*scaleResult, format string) []string {
	titles := make([]string, len(results))
	for i, r := range results {
		titles[i] = fmt.Sprintf(format, r.scale)
	}
	return titles
}

func renderReport(o options, results []*scaleResult, began time.Time) string {
	var b strings.Builder
	writeRunNotes(&b, o, results, began)
	figureTable(o, results).write(&b, "Figure", scaleTitles(results, "configs ×%d"))
	b.WriteString("\n### Targets\n\n")
	targetTable(results).write(&b, "Target", scaleTitles(results, "×%d"))
	writeProfiles(&b, o, results)
	return b.String()
}

// writeRunNotes says what ran where, and warns of anything that slowed it.
func writeRunNotes(b *strings.Builder, o options, results []*scaleResult, began time.Time) {
	fmt.Fprintf(b, "## Benchmark run of %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "- Machine: %s\n", machine())
	fmt.Fprintf(b, "- Controller: `%s` (%s), config `%s`, extra flags: `%s`, extra env: `%s`; extra kube-apiserver flags: `%s`\n",
		o.controllerPath, o.version, o.configFile, strings.Join(o.controllerArgs, " "), strings.Join(o.controllerEnv, " "), strings.Join(o.apiserverArgs, " "))
	fmt.Fprintf(b, "- Scenario: %d ConfigMaps × %d kB and %d Secrets × %d kB (10 keys each, random data) at scale ×1; %d Deployments (replicas 0) each reading 2 ConfigMaps (volume; env configMapKeyRef) and 2 Secrets (envFrom; projected items)\n",
		o.configMaps, o.configMapKB, o.secrets, o.secretKB, o.deployments)
	if o.largeSources > 0 {
		fmt.Fprintf(b, "- Large sources, last: %d ConfigMaps of %d empty keys in namespace %s, read by nothing; a fresh controller started before and one after they are created (the first also while they are created), each measured once ready and quiet\n",
			o.largeSources, o.largeKeys, unrelatedNamespace)
	}
	fmt.Fprintf(b, "- Config changes: %s\n", map[string]string{
		"put":         "unconditional update of the whole object, new random data in every key, protobuf (`--update put`)",
		"merge-patch": "JSON merge patch of key k0 (`--update merge-patch`)",
	}[o.update])
	fmt.Fprintf(b, "- Whole run: %s\n", time.Since(began).Round(time.Second))
	clean := true
	for _, r := range results {
		if r.others != "" {
			clean = false
			fmt.Fprintf(b, "- **Warning**: other heavy processes ran during scale ×%d (%s); its figures are slowed by them\n", r.scale, r.others)
		}
	}
	if clean {
		b.WriteString("- No other cluster or test process ran during the benchmark\n")
	}
	b.WriteString("\n")
}

// figureTable has a column per scale and the rows in the order the scenario
// measures them.
func figureTable(o options, results []*scaleResult) *table {
	t := &table{}
	for col, r := range results {
		c := column{t: t, col: col, ncols: len(results)}
		syncRows(c, r)
		phaseRows(c, r.singles, o.updaters)
		for _, p := range r.fanOut {
			phaseRows(c, p, o.updaters)
		}
		firstRunRows(c, r.first)
		graceStartRows(c, o.grace, r.second)
		largeRows(c, r.large)
	}
	return t
}

func largeRows(c column, f *largeFigures) {
	if f == nil {
		return
	}
	mib := func(kb int64) string { return fmt.Sprintf("%+.1f MiB", float64(kb)/1024) }
	c.set("Large sources: ConfigMaps of empty keys in an unrelated namespace, created after the scenario", "%d × %d keys, %.1f MB",
		f.sources, f.keys, float64(f.bytes)/1e6)
	c.set("Large sources, fresh start: peak RSS without / with them (growth)", "%s / %s (**%s**)",
		kbString(f.without.hwm), kbString(f.with.hwm), mib(f.with.hwm-f.without.hwm))
	c.set("Large sources, fresh start: Go heap in use after sync without / with them", "%.1f / %.1f MiB",
		f.without.heapInuse/(1<<20), f.with.heapInuse/(1<<20))
	c.set("Large sources, created while running: peak RSS before → after (growth)", "%s → %s (**%s**)",
		kbString(f.live.hwmBefore), kbString(f.live.hwmAfter), mib(f.live.hwmAfter-f.live.hwmBefore))
	c.set("Large sources, created while running: RSS / Go heap in use before → after", "%s → %s / %.1f → %.1f MiB",
		kbString(f.live.rssBefore), kbString(f.live.rssAfter), f.live.heapBefore/(1<<20), f.live.heapAfter/(1<<20))
}

// largeGrowth is the larger of the two peak RSS growths the large sources
// cause: at a fresh start, and created while running.
func largeGrowth(f *largeFigures) int64 {
	return max(f.with.hwm-f.without.hwm, f.live.hwmAfter-f.live.hwmBefore)
}

func syncRows(c column, r *scaleResult) {
	c.set("Config data", "%.0f MB", float64(r.setUp.sourceBytes)/1e6)
	c.set("Objects created in (set-up, not the controller)", "%.1f s", r.setUp.createDur.Seconds())
	s := r.sync
	c.set("Time to ready (start → caches synced: /readyz 200 and restart_controller_ready 1)", "%s", sec(s.ready))
	c.set("First /readyz 200 after start", "%s", sec(s.readyz))
	c.set("CPU seconds to ready", "%.2f s", s.cpu)
	c.set("Peak RSS at ready (VmHWM)", "%s", kbString(s.hwm))
	c.set("Initial recording: Deployments annotated / time after ready", "%d / %s", s.recorded, sec(s.recordDur))
	c.set("Initial recording: PATCHes / restarts", "%.0f / %d", s.recordWrites, s.firstRestarts)
	c.set("Go heap in use after sync (after GC)", "%.1f MiB", s.heapInuse/(1<<20))
}

func firstRunRows(c column, p procFigures) {
	c.set("**Peak RSS, whole run (VmHWM)**", "**%s**", kbString(p.hwm))
	c.set("Max sampled RSS (200 ms) / RSS at end", "%s / %s", kbString(p.sampled), kbString(p.rss))
	c.set("RSS at end: anonymous (Go heap, stacks) / file-backed (mapped binary)", "%s / %s", kbString(p.anon), kbString(p.file))
	c.set("CPU seconds, whole run", "%.2f s", p.cpu)
}

func graceStartRows(c column, grace time.Duration, g graceStartFigures) {
	c.set(fmt.Sprintf("Second start (grace %s): time to ready / first /readyz 200", grace), "%s / %s", sec(g.ready), sec(g.readyz))
	c.set(fmt.Sprintf("Second start (grace %s): PATCHes at start-up", grace), "%.0f", g.writes)
	if p := g.singles; p != nil {
		st := stats(p.latencies)
		lbl := fmt.Sprintf("One change, grace %s: latency − grace p50 / max (n=%d)", grace, p.changes)
		c.set(lbl, "%s / %s", sec(minus(st.p50, p.grace)), sec(minus(st.max, p.grace)))
		c.set(fmt.Sprintf("One change, grace %s: restarts / changes", grace), "%d / %d%s", p.restarts, p.changes, missingNote(p))
	}
	c.set(fmt.Sprintf("Second start (grace %s): peak RSS / CPU seconds", grace), "%s / %.2f s", kbString(g.proc.hwm), g.proc.cpu)
}

// target is one row of the targets table: how each scale fares.
type target struct {
	label   string
	verdict func(r *scaleResult) string
}

func targetTable(results []*scaleResult) *table {
	t := &table{}
	for _, tg := range targets(results) {
		r := &row{label: tg.label}
		for _, res := range results {
			r.values = append(r.values, tg.verdict(res))
		}
		t.rows = append(t.rows, r)
	}
	return t
}

func targets(results []*scaleResult) []target {
	out := []target{{"Peak RSS ≤ 64 MiB", func(r *scaleResult) string {
		return fmt.Sprintf("%s (%s)", mark(r.first.hwm <= targetRSSKB && r.second.proc.hwm <= targetRSSKB), kbString(max(r.first.hwm, r.second.proc.hwm)))
	}}}
	if len(results) > 1 {
		first := results[0]
		out = append(out, target{fmt.Sprintf("Peak RSS within 10%% of ×%d", first.scale), func(r *scaleResult) string {
			g := float64(r.first.hwm)/float64(first.first.hwm) - 1
			return fmt.Sprintf("%s (%+.1f%%)", mark(g <= targetRSSGrowth), 100*g)
		}})
	}
	out = append(out,
		target{"Ready within 10 s", func(r *scaleResult) string {
			return fmt.Sprintf("%s (%s, %s)", mark(r.sync.ready <= targetReady && r.second.ready <= targetReady), sec(r.sync.ready), sec(r.second.ready))
		}},
		target{"One change: patched within grace + 100 ms (max)", singleChangeVerdict},
	)
	out = append(out, fanOutTargets(results[0].fanOut)...)
	if results[0].large != nil {
		f := results[0].large
		out = append(out, target{fmt.Sprintf("%d ConfigMaps of %d keys in an unrelated namespace raise peak RSS by ≤ %d MiB (fresh start; created while running)", f.sources, f.keys, targetLargeKB>>10),
			func(r *scaleResult) string {
				if r.large == nil {
					return "–"
				}
				return fmt.Sprintf("%s (%+.1f MiB; %+.1f MiB)", mark(largeGrowth(r.large) <= targetLargeKB),
					float64(r.large.with.hwm-r.large.without.hwm)/1024, float64(r.large.live.hwmAfter-r.large.live.hwmBefore)/1024)
			}})
	}
	return out
}

func singleChangeVerdict(r *scaleResult) string {
	var worst time.Duration
	ok := true
	for _, p := range []*phaseResult{r.singles, r.second.singles} {
		if p == nil {
			continue
		}
		st := stats(p.latencies)
		worst = max(worst, minus(st.max, p.grace))
		ok = ok && st.n > 0 && p.missing == 0 && p.updateErrs == 0 && st.max-p.grace <= targetSingleExtra
	}
	return fmt.Sprintf("%s (worst %s over grace)", mark(ok), sec(worst))
}

// fanOutTargets has a row for each fan-out phase the issue sets a target for
// (N=200, N=1000), named after the first scale's phases.
func fanOutTargets(phases []*phaseResult) []target {
	var out []target
	for _, p := range phases {
		var limit time.Duration
		switch {
		case strings.HasPrefix(p.name, fmt.Sprintf("N=%d ", smallN)):
			limit = targetP99Small
		case strings.HasPrefix(p.name, fmt.Sprintf("N=%d ", largeN)):
			limit = targetP99Large
		default:
			continue
		}
		extra := ""
		if p.changes == p.deps {
			extra = ", every Deployment restarted exactly once"
		}
		label := fmt.Sprintf("%s: p99 ≤ %s%s", strings.TrimSuffix(p.name, ", grace 0"), sec(limit), extra)
		out = append(out, target{label, fanOutVerdict(p.name, limit)})
	}
	return out
}

func fanOutVerdict(name string, limit time.Duration) func(r *scaleResult) string {
	return func(r *scaleResult) string {
		for _, q := range r.fanOut {
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
	}
}

func writeProfiles(b *strings.Builder, o options, results []*scaleResult) {
	for _, r := range results {
		if r.sync.cpuProfile != "" {
			fmt.Fprintf(b, "\n### CPU profile of the first %s after start (the sync), configs ×%d\n\n```\n%s```\n", o.cpuProfileSync, r.scale, r.sync.cpuProfile)
		}
		if r.heapTop != "" {
			fmt.Fprintf(b, "\n### Heap profile after sync, configs ×%d (peak RSS over target)\n\n```\n%s```\n", r.scale, r.heapTop)
		}
	}
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

func phaseRows(c column, p *phaseResult, updaters int) {
	st := stats(p.latencies)
	short := strings.TrimSuffix(p.name, ", grace 0")
	if p.changes <= 20 && !strings.HasPrefix(p.name, "N=") {
		c.set(short+" (grace 0): latency p50 / max (n="+fmt.Sprint(p.changes)+")", "%s / %s", sec(st.p50), sec(st.max))
		c.set(short+" (grace 0): update call returned p50", "%s", sec(stats(p.returned).p50))
		c.set(short+" (grace 0): restarts / changes", "%d / %d%s", p.restarts, p.changes, missingNote(p))
		return
	}
	c.set(short+": latency p50 / p90 / p99 / max", "%s / %s / %s / %s", sec(st.p50), sec(st.p90), sec(st.p99), sec(st.max))
	sd := stats(p.sinceDone)
	c.set(short+": latency from update returned p50 / p99 / max", "%s / %s / %s", sec(sd.p50), sec(sd.p99), sec(sd.max))
	c.set(short+": update calls returned p50 / max", "%s / %s", sec(stats(p.returned).p50), sec(stats(p.returned).max))
	c.set(fmt.Sprintf("%s: updates issued over (first → last issued, %d at a time)", short, updaters), "%s", sec(p.issueSpan))
	c.set(short+": last restart seen after first update / controller CPU seconds", "%s / %.2f s", sec(p.wall), p.cpu)
	c.set(short+": restarts / changes (Deployments)", "%d / %d (%d)%s", p.restarts, p.changes, p.deps, missingNote(p))
	c.set(short+": Deployments restarted exactly once", "%d / %d (max %d each)", p.once, p.deps, p.maxPerDep)
	perRestart := "–"
	if p.restarts > 0 {
		perRestart = fmt.Sprintf("%.2f", p.patches/float64(p.restarts))
	}
	c.set(short+": PATCHes per restart (conflicts)", "%s (%.0f)", perRestart, p.conflicts)
	c.set(short+": controller's PATCH call, mean duration", "%s", sec(p.patchMean))
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
