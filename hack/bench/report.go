package main

import (
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Targets (2-core machine).
const (
	targetRSSKB           = 64 << 10 // 64 MiB
	targetRSSGrowth       = 0.10     // peak RSS with sources ×4 within 10% of ×1
	targetReady           = 10 * time.Second
	targetSingleExtra     = 100 * time.Millisecond // one change: grace + 100 ms
	targetP99Small        = 2 * time.Second        // N=200
	targetP99Large        = 6 * time.Second        // N=1000
	targetLargeKB         = 5 << 10                // large sources in an unrelated namespace add ≤ 5 MiB
	targetPatcherRatio    = 1.3                    // fan-out p99 against the zero-logic patcher, default scenario
	target10kPatcherRatio = 1.3                    // the same at 10,000 and 50,000 workloads (issue 29; 1.5 before)
	targetFloorRSSRatio   = 1.2                    // 10k: peak RSS against the floor
	targetFloorCPURatio   = 1.3                    // 10k: CPU seconds to ready against the floor
	smallN, largeN        = 200, 1000
)

func kbString(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

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
// column titles; an empty cell is "–".
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
			if v == "" {
				v = "–"
			}
			fmt.Fprintf(b, " %s |", v)
		}
		b.WriteString("\n")
	}
}

// column fills one column of a table.
type column struct {
	t          *table
	col, ncols int
}

func (c column) set(label, format string, args ...any) {
	c.t.set(c.col, c.ncols, label, fmt.Sprintf(format, args...))
}

// renderScenario is the one report writer: a scenario's run notes, its
// figures (a column per scale and program), its targets (a column per
// scale) and any profiles.
func renderScenario(o options, sc *scenario, runs []*scaleRun, began time.Time) string {
	var b strings.Builder
	writeRunNotes(&b, o, sc, runs, began)
	t, titles := figureTable(o, sc, runs)
	t.write(&b, "Figure", titles)
	b.WriteString("\n### Targets\n\n")
	var scaleTitles []string
	for _, r := range runs {
		scaleTitles = append(scaleTitles, fmt.Sprintf("×%d", r.scale))
	}
	targetTable(sc, runs).write(&b, "Target", scaleTitles)
	writeComparisons(&b, sc, runs)
	writeProfiles(&b, runs)
	return b.String()
}

// writeRunNotes says what ran where, and warns of anything that slowed it.
func writeRunNotes(b *strings.Builder, o options, sc *scenario, runs []*scaleRun, began time.Time) {
	fmt.Fprintf(b, "\n## Scenario %s: run of %s\n\n", sc.name, began.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "- %s\n", sc.about)
	fmt.Fprintf(b, "- Machine: %s\n", machine())
	fmt.Fprintf(b, "- Controller: `%s` (%s), config `%s`, extra flags: `%s`, extra env: `%s`; extra kube-apiserver flags: `%s`\n",
		o.controllerPath, o.version, o.configFile, strings.Join(o.controllerArgs, " "), strings.Join(o.controllerEnv, " "),
		strings.Join(append(append([]string(nil), sc.apiserverArgs...), o.apiserverArgs...), " "))
	fmt.Fprintf(b, "- Programs, in the order they ran on the same cluster and objects: %s\n", strings.Join(sc.programs, ", "))
	for _, r := range runs {
		fmt.Fprintf(b, "- ×%d: %s\n", r.scale, r.objs.summary())
	}
	if sc.large {
		fmt.Fprintf(b, "- Large sources, after the controller's phases: %d ConfigMaps of %d empty keys in namespace %s, read by nothing; a fresh controller started before and one after they are created (the first also while they are created), each measured once ready and quiet\n",
			o.largeSources, o.largeKeys, unrelatedNamespace)
	}
	fmt.Fprintf(b, "- Whole run so far: %s\n", time.Since(began).Round(time.Second))
	clean := true
	for _, r := range runs {
		for _, n := range r.notes {
			fmt.Fprintf(b, "- ×%d %s\n", r.scale, n)
		}
		if r.others != "" {
			clean = false
			fmt.Fprintf(b, "- **Warning**: other heavy processes ran during ×%d (%s); its figures are slowed by them\n", r.scale, r.others)
		}
	}
	if clean {
		b.WriteString("- No other cluster or test process ran during the scenario\n")
	}
	b.WriteString("\n")
}

// figureTable has a column per scale and program run (a program that ran
// twice has two), the rows in the order the harness measures them.
func figureTable(o options, sc *scenario, runs []*scaleRun) (*table, []string) {
	t := &table{}
	type col struct {
		r     *scaleRun
		p     *programRun
		title string
	}
	var cols []col
	for _, r := range runs {
		for _, p := range displayOrder(r.runs) {
			title := r.label(p)
			if len(runs) > 1 {
				title = fmt.Sprintf("×%d %s", r.scale, title)
			}
			cols = append(cols, col{r, p, title})
		}
	}
	var titles []string
	for i, cl := range cols {
		titles = append(titles, cl.title)
		c := column{t: t, col: i, ncols: len(cols)}
		if cl.p.prog == progController {
			setUpRows(c, cl.r)
		}
		programRows(c, cl.p, o.updaters)
		if cl.p.prog == progController {
			floorRatioRows(c, cl.r)
			graceStartRows(c, o.grace, cl.r.second)
			largeRows(c, cl.r.large)
			restartRows(c, cl.r)
		}
	}
	return t, titles
}

// displayOrder puts the controller first, then the references it is
// compared with, whatever order they ran in; a program that ran twice keeps
// its runs in order.
func displayOrder(runs []*programRun) []*programRun {
	var out []*programRun
	for _, prog := range []string{progController, progFloor, progPatcher} {
		for _, p := range runs {
			if p.prog == prog {
				out = append(out, p)
			}
		}
	}
	return out
}

// label names a program run in the report: its program, and, for a
// program that ran more than once, which of its runs this is.
func (r *scaleRun) label(p *programRun) string {
	n := count(progNames(r.runs), p.prog)
	if n < 2 {
		return p.prog
	}
	k := 0
	for _, q := range r.runs[:slices.Index(r.runs, p)+1] {
		if q.prog == p.prog {
			k++
		}
	}
	return fmt.Sprintf("%s (%d of %d)", p.prog, k, n)
}

func progNames(runs []*programRun) []string {
	var out []string
	for _, p := range runs {
		out = append(out, p.prog)
	}
	return out
}

func setUpRows(c column, r *scaleRun) {
	c.set("Config data", "%.0f MB", float64(r.objs.dataBytes())/1e6)
	c.set("Objects created in (set-up, not the program)", "%.1f s", r.createDur.Seconds())
}

// programRows are every program's figures; a row a program has no figure
// for stays empty.
func programRows(c column, p *programRun, updaters int) {
	c.set("Time to ready (start → caches synced; controller: /readyz 200 and restart_controller_ready 1)", "%s", sec(p.ready))
	if p.readyz > 0 {
		c.set("First /readyz 200 after start", "%s", sec(p.readyz))
	}
	c.set("CPU seconds to ready", "%.2f s", p.cpuReady)
	c.set("Peak RSS at ready (VmHWM)", "%s", kbString(p.hwmReady))
	c.set("Steady RSS (3 s after ready; controller: once every workload is recorded and it is quiet)", "%s", kbString(p.steady))
	c.set("Steady RSS: anonymous / file-backed (the binary)", "%s / %s", kbString(p.anon), kbString(p.file))
	c.set("Go heap in use after sync (after GC)", "%s", mib(p.heapInuse))
	if p.prog == progController {
		c.set("Controller's steady memory as the Go runtime sees it", "%s", p.goMem)
		c.set("Initial recording: workloads annotated / time after ready / CPU seconds", "%d / %s / %.2f s", p.recorded, sec(p.recordDur), p.recordCPU)
		c.set("Initial recording: PATCHes / restarts", "%.0f / %d", p.recordWrites, p.firstRestarts)
	}
	if p.singles != nil {
		phaseRows(c, "One change (grace 0)", p.singles, updaters)
	}
	for _, ph := range p.fanOut {
		phaseRows(c, fmt.Sprintf("N=%d simultaneous changes", ph.n), ph, updaters)
	}
	c.set("**Peak RSS, whole run (VmHWM)**", "**%s**", kbString(p.total.hwm))
	c.set("Max sampled RSS (200 ms) / RSS at end", "%s / %s", kbString(p.total.sampled), kbString(p.total.rss))
	c.set("RSS at end: anonymous (Go heap, stacks) / file-backed (mapped binary)", "%s / %s", kbString(p.total.anon), kbString(p.total.file))
	c.set("CPU seconds, whole run", "%.2f s", p.total.cpu)
}

// floorRatioRows are the controller's figures over the floor's, measured in
// the same run on the same cluster.
func floorRatioRows(c column, r *scaleRun) {
	ctl, fl := r.program(progController), r.program(progFloor)
	if ctl == nil || fl == nil {
		return
	}
	x := func(a, b float64) string {
		if b <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	c.set("Controller ÷ floor: time to ready / CPU seconds to ready", "%s / %s", x(ctl.ready.Seconds(), fl.ready.Seconds()), x(ctl.cpuReady, fl.cpuReady))
	c.set("Controller ÷ floor: peak RSS at ready / whole run (against the floor's peak) / steady RSS", "%s / %s / %s",
		x(float64(ctl.hwmReady), float64(fl.hwmReady)), x(float64(ctl.total.hwm), float64(fl.hwmReady)), x(float64(ctl.steady), float64(fl.steady)))
	c.set("Controller ÷ floor: Go heap in use after sync", "%s", x(ctl.heapInuse, fl.heapInuse))
}

func phaseRows(c column, short string, p *phaseResult, updaters int) {
	st := stats(p.latencies)
	if p.n == 0 {
		c.set(short+": latency p50 / max (n="+fmt.Sprint(p.changes)+")", "%s / %s", sec(st.p50), sec(st.max))
		c.set(short+": update call returned p50", "%s", sec(stats(p.returned).p50))
		c.set(short+": restarts / changes", "%d / %d%s", p.restarts, p.changes, missingNote(p))
		return
	}
	c.set(short+": latency p50 / p90 / p99 / max", "%s / %s / %s / %s", sec(st.p50), sec(st.p90), sec(st.p99), sec(st.max))
	sd := stats(p.sinceDone)
	c.set(short+": latency from update returned p50 / p99 / max", "%s / %s / %s", sec(sd.p50), sec(sd.p99), sec(sd.max))
	c.set(short+": update calls returned p50 / max", "%s / %s", sec(stats(p.returned).p50), sec(stats(p.returned).max))
	c.set(fmt.Sprintf("%s: updates issued over (first → last issued, %d at a time)", short, updaters), "%s", sec(p.issueSpan))
	c.set(short+": last restart seen after first update / program's CPU seconds", "%s / %.2f s", sec(p.wall), p.cpu)
	c.set(short+": restarts / changes (workloads)", "%d / %d (%d)%s", p.restarts, p.changes, p.deps, missingNote(p))
	c.set(short+": workloads restarted exactly once", "%d / %d (max %d each)", p.once, p.deps, p.maxPerDep)
	perRestart := "–"
	if p.restarts > 0 {
		perRestart = fmt.Sprintf("%.2f", p.patches/float64(p.restarts))
	}
	c.set(short+": PATCHes per restart (controller's conflicts)", "%s (%.0f)", perRestart, p.conflicts)
	if p.patchMean > 0 {
		c.set(short+": controller's PATCH call, mean duration", "%s", sec(p.patchMean))
	}
	if p.ctrl != (ctrlMeans{}) {
		c.set(short+": mean queue wait / PATCH (client side) / change seen → restart decided (controller)", "%.0f / %.0f / %.0f ms", 1000*p.ctrl.queue, 1000*p.ctrl.patch, 1000*p.ctrl.changeToRestart)
	}
	if p.api != nil {
		c.set(short+": API server writes, first update to quiet (mean duration)", "%.0f: %s", p.api.total(), p.api.writes(8))
		c.set(short+": etcd write mean / CPU seconds of the control plane", "%.1f ms (%.0f) / %s", 1000*p.api.etcdMean, p.api.etcdN, p.api.cpuLine())
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
		notes = append(notes, fmt.Sprintf("%d restarts of untouched workloads", p.stray))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

func graceStartRows(c column, grace time.Duration, g *graceStartFigures) {
	if g == nil {
		return
	}
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

func largeRows(c column, f *largeFigures) {
	if f == nil {
		return
	}
	d := func(kb int64) string { return fmt.Sprintf("%+.1f MiB", float64(kb)/1024) }
	c.set("Large sources: ConfigMaps of empty keys in an unrelated namespace, created after the scenario", "%d × %d keys, %.1f MB",
		f.sources, f.keys, float64(f.bytes)/1e6)
	c.set("Large sources, fresh start: peak RSS without / with them (growth)", "%s / %s (**%s**)",
		kbString(f.without.hwm), kbString(f.with.hwm), d(f.with.hwm-f.without.hwm))
	c.set("Large sources, fresh start: Go heap in use after sync without / with them", "%.1f / %.1f MiB",
		f.without.heapInuse/(1<<20), f.with.heapInuse/(1<<20))
	c.set("Large sources, created while running: peak RSS before → after (growth)", "%s → %s (**%s**)",
		kbString(f.live.hwmBefore), kbString(f.live.hwmAfter), d(f.live.hwmAfter-f.live.hwmBefore))
	c.set("Large sources, created while running: RSS / Go heap in use before → after", "%s → %s / %.1f → %.1f MiB",
		kbString(f.live.rssBefore), kbString(f.live.rssAfter), f.live.heapBefore/(1<<20), f.live.heapAfter/(1<<20))
}

// largeGrowth is the larger of the two peak RSS growths the large sources
// cause: at a fresh start, and created while running.
func largeGrowth(f *largeFigures) int64 {
	return max(f.with.hwm-f.without.hwm, f.live.hwmAfter-f.live.hwmBefore)
}

func writeProfiles(b *strings.Builder, runs []*scaleRun) {
	for _, r := range runs {
		c := r.program(progController)
		for _, p := range []struct{ name, top string }{
			{"CPU profile of the controller's start (the sync)", c.cpuProfile},
			{"CPU profile of the controller's last fan-out", c.cpuFanOut},
			{"CPU profile of the API server during the controller's last fan-out", c.apiFanOut},
			{"CPU profile of the API server during the zero-logic patcher's last fan-out", patcherAPIFanOut(r)},
			{"Where the controller's goroutines waited in its last fan-out (execution trace)", c.traceFanOut},
			{"Where the zero-logic patcher's goroutines waited in its last fan-out (execution trace)", patcherTrace(r)},
			{"Heap profile after sync (peak RSS over target)", r.heapTop},
		} {
			if p.top != "" {
				fmt.Fprintf(b, "\n<details><summary>%s, ×%d</summary>\n\n```\n%s```\n</details>\n", p.name, r.scale, p.top)
			}
		}
	}
}

// patcherAPIFanOut is the API server's profile in the first patcher run's
// last fan-out, "" when none was taken.
func patcherAPIFanOut(r *scaleRun) string {
	if p := r.program(progPatcher); p != nil {
		return p.apiFanOut
	}
	return ""
}

// patcherTrace is the trace summary of the first patcher run's last
// fan-out, "" when none was taken.
func patcherTrace(r *scaleRun) string {
	if p := r.program(progPatcher); p != nil {
		return p.traceFanOut
	}
	return ""
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

// ratioOf is a/b, or NaN when b is not positive.
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// fanOutPhase is a program's fan-out of n changes, nil when it has none.
func (p *programRun) fanOutPhase(n int) *phaseResult {
	if p == nil {
		return nil
	}
	i := slices.IndexFunc(p.fanOut, func(ph *phaseResult) bool { return ph.n == n })
	if i < 0 {
		return nil
	}
	return p.fanOut[i]
}
