package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/hack/bench/trend"
)

// cells returns the cells of the report's row whose label starts with
// label, nil when there is none.
func cells(report, label string) []string {
	for _, l := range strings.Split(report, "\n") {
		if strings.HasPrefix(l, "| "+label) {
			f := strings.Split(strings.Trim(l, "|"), "|")
			for i := range f {
				f[i] = strings.TrimSpace(f[i])
			}
			return f[1:]
		}
	}
	return nil
}

func TestReportHasEveryProgramBesideTheController(t *testing.T) {
	o := testOptions()
	o.scales = []int{1}
	sc := scenarioNamed(o, "default")
	report := renderScenario(o, sc, []*scaleRun{fixtureRun(o, sc)}, time.Now())

	header := cells(report, "Figure")
	if strings.Join(header, ",") != "controller,floor,zero-logic patcher" {
		t.Fatalf("columns %v, want controller, floor, zero-logic patcher:\n%s", header, report)
	}
	for label, want := range map[string][]string{
		"**Peak RSS, whole run":                         {"**36.0 MiB**", "**20.0 MiB**", "**16.0 MiB**"},
		"CPU seconds to ready":                          {"1.20 s", "1.00 s", "0.30 s"},
		"N=2 simultaneous changes: latency p50 / p90":   {"0.100 s / 0.500 s / 0.500 s / 0.500 s", "–", "0.090 s / 0.400 s / 0.400 s / 0.400 s"},
		"Initial recording: workloads annotated":        {"4 / 1.000 s / 0.00 s", "–", "–"},
		"Second start (grace 2s): peak RSS":             {"33.0 MiB / 0.00 s", "–", "–"},
		"One change (grace 0): latency p50 / max (n=1)": {"0.015 s / 0.015 s", "–", "0.010 s / 0.010 s"},
		"Objects created in (set-up, not the program)":  {"3.0 s", "–", "–"},
		"N=4 simultaneous changes: restarts / changes":  {"4 / 4 (4)", "–", "4 / 4 (4)"},
		"N=2 simultaneous changes: p99 ≤ 1.3× the zero": {"met (p99 1.25×: 0.500 s / 0.400 s; p50 1.11×: 0.100 s / 0.090 s)"},
		"N=4 simultaneous changes: p99 ≤ 1.3× the zero": {"**not met** (p99 3.00×: 0.300 s / 0.100 s; p50 3.33×: 0.200 s / 0.060 s)"},
		"Controller ÷ floor: time to ready / CPU":       {"2.00× / 1.20×", "–", "–"},
		"Controller ÷ floor: peak RSS at ready":         {"1.50× / 1.80× / 2.00×", "–", "–"},
		"Controller ÷ floor: Go heap":                   {"2.00×", "–", "–"},
		"One change: patched within grace + 100 ms":     {"met (worst 0.020 s over grace)"},
	} {
		if got := cells(report, label); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("row %q = %q, want %q", label, got, want)
		}
	}
	// Every row has a cell per column: 3 programs, and one target column.
	targets := strings.Index(report, "### Targets")
	for _, l := range strings.Split(report[:targets], "\n") {
		if strings.HasPrefix(l, "| ") && strings.Count(l, "|") != 5 {
			t.Errorf("figure row with %d cells: %s", strings.Count(l, "|")-2, l)
		}
	}
}

func TestReportOfTheTenThousandScenarioComparesWithTheFloor(t *testing.T) {
	o := testOptions()
	sc := scenarioNamed(o, "10k")
	sc.changes = []int{2}
	r := fixtureRun(o, sc)
	r.second = nil
	report := renderScenario(o, sc, []*scaleRun{r}, time.Now())
	for label, want := range map[string]string{
		"Peak RSS, whole run ≤ 1.2× the floor's":        "**not met** (1.80×: 36.0 MiB / 20.0 MiB)",
		"CPU seconds to ready ≤ 1.3× the floor's":       "met (1.20×: 1.20 s / 1.00 s)",
		"N=2 simultaneous changes: p99 ≤ 1.3× the zero": "met (p99 1.25×: 0.500 s / 0.400 s; p50 1.11×: 0.100 s / 0.090 s)",
	} {
		if got := cells(report, label); len(got) != 1 || got[0] != want {
			t.Errorf("row %q = %q, want %q\n%s", label, got, want, report)
		}
	}
	if cells(report, "Peak RSS ≤ 64 MiB") != nil {
		t.Errorf("the 10k scenario has no absolute RSS target")
	}
}

func TestTrendRunHasEveryProgramsHeadlineFigures(t *testing.T) {
	o := testOptions()
	sc := scenarioNamed(o, "default")
	run := newTrendRun("restart-controller v1-abc", "test machine", time.Date(2026, 11, 25, 16, 0, 0, 0, time.UTC), []*scaleRun{fixtureRun(o, sc)})
	if run.Commit != "v1-abc" || run.Date != "2026-11-25T16:00:00Z" || run.Machine != "test machine" || !run.Clean {
		t.Errorf("run header %+v", run)
	}
	if len(run.Results) != 3 {
		t.Fatalf("%d results, want one per program", len(run.Results))
	}
	c := run.Results[1]
	want := trend.Result{Scenario: "default", Scale: 1, Program: progController, PeakRSSMiB: 36, CPUToReadySeconds: 1.2, ReadySeconds: 2,
		FanOut: []trend.Latency{
			{Changes: 2, P50Seconds: 0.1, P99Seconds: 0.5, Comparisons: 1, P99RatioMedian: 1.25, P99RatioMin: 1.25, P99RatioMax: 1.25},
			{Changes: 4, P50Seconds: 0.2, P99Seconds: 0.3, Comparisons: 1, P99RatioMedian: 3, P99RatioMin: 3, P99RatioMax: 3}}}
	if c.Scenario != want.Scenario || c.Program != want.Program || c.PeakRSSMiB != want.PeakRSSMiB || c.CPUToReadySeconds != want.CPUToReadySeconds ||
		c.ReadySeconds != want.ReadySeconds || len(c.FanOut) != 2 || c.FanOut[0] != want.FanOut[0] || c.FanOut[1] != want.FanOut[1] {
		t.Errorf("controller result %+v, want %+v", c, want)
	}
	if run.Results[0].Program != progFloor || run.Results[0].FanOut != nil {
		t.Errorf("floor result %+v: no fan-out", run.Results[0])
	}
}

func TestRecordTrendAppendsAndDraws(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.version = "v1"
	o.trend, o.plot = filepath.Join(dir, "BENCHMARKS.json"), filepath.Join(dir, "BENCHMARKS.svg")
	sc := scenarioNamed(o, "default")
	for range 2 {
		if err := recordTrend(o, []*scaleRun{fixtureRun(o, sc)}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	tf, err := trend.Read(o.trend)
	if err != nil || len(tf.Runs) != 2 {
		t.Fatalf("after two runs: %d runs, %v", len(tf.Runs), err)
	}
	svg, err := os.ReadFile(o.plot)
	if err != nil || !strings.Contains(string(svg), "<svg") {
		t.Errorf("plot: %v\n%s", err, svg)
	}
}
