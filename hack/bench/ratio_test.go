package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSpreadIsTheMedianAndRange(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want spread
		text string
	}{
		{[]float64{1.25}, spread{1, 1.25, 1.25, 1.25}, "1.25×"},
		{[]float64{2.12, 1.28, 1.48}, spread{3, 1.48, 1.28, 2.12}, "1.48× (median of 3: 1.28–2.12×)"},
		{[]float64{1.0, 2.0}, spread{2, 1.5, 1.0, 2.0}, "1.50× (median of 2: 1.00–2.00×)"},
	} {
		got := spreadOf(tc.in)
		if got != tc.want || got.String() != tc.text {
			t.Errorf("spreadOf(%v) = %+v %q, want %+v %q", tc.in, got, got, tc.want, tc.text)
		}
	}
}

func TestPairsAlternateWhoRunsFirst(t *testing.T) {
	if p := pairOrder(2); p[0] != progController || p[1] != progPatcher {
		t.Errorf("pair 2: %v, want the controller first (the full run had the patcher first)", p)
	}
	if p := pairOrder(3); p[0] != progPatcher || p[1] != progController {
		t.Errorf("pair 3: %v, want the patcher first", p)
	}
}

// fixturePair is a pair whose N=2 fan-outs have these p99s (ms).
func fixturePair(n int, ctrlP99, patcherP99 int) *pairRun {
	ctrl := &programRun{prog: progController, fanOut: []*phaseResult{fixturePhase(2, ms(50, ctrlP99))}}
	z := &programRun{prog: progPatcher, fanOut: []*phaseResult{fixturePhase(2, ms(50, patcherP99))}}
	runs := []*programRun{z, ctrl}
	if pairOrder(n)[0] == progController {
		runs = []*programRun{ctrl, z}
	}
	return &pairRun{n: n, runs: runs}
}

func TestTheTargetIsCheckedOnTheMedianOfThePairs(t *testing.T) {
	o := testOptions()
	o.scales = []int{1}
	sc := scenarioNamed(o, "default")
	r := fixtureRun(o, sc) // N=2: 500 ms against 400 ms, 1.25×
	// One pair far over the target, one under: the median is the full run's.
	r.pairs = []*pairRun{fixturePair(2, 900, 300), fixturePair(3, 400, 400)}
	p99, _, complete := r.fanOutRatios(2)
	if p99.n != 3 || p99.median != 1.25 || p99.min != 1 || p99.max != 3 || !complete {
		t.Fatalf("ratios %+v complete %v, want median 1.25 of 3, 1–3", p99, complete)
	}
	report := renderScenario(o, sc, []*scaleRun{r}, time.Now())
	got := cells(report, "N=2 simultaneous changes: p99 ≤ 1.3×")
	if len(got) != 1 || !strings.HasPrefix(got[0], "met (p99 1.25× (median of 3: 1.00–3.00×)") {
		t.Errorf("target %q\n%s", got, report)
	}
	for _, want := range []string{
		"| ×1 | pair 2 | controller, then patcher | 2 | 0.050 s / 0.900 s | 0.050 s / 0.300 s | 3.00× | 1.00× | 0.900 s / 0.300 s (3.00×) |",
		"| ×1 | pair 3 | patcher, then controller | 2 |",
		"| ×1 | **median** | | 2 | | | **1.25×** (1.00–3.00×) |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestAPatcherBeforeAndAfterTheControllerGivesTwoComparisons(t *testing.T) {
	o := testOptions()
	sc := scenarioNamed(o, "10k")
	sc.changes = []int{2}
	r := fixtureRun(o, sc)
	r.second = nil
	after := &programRun{prog: progPatcher, fanOut: []*phaseResult{fixturePhase(2, ms(90, 250))}}
	r.runs = append(r.runs, after) // floor, controller, patcher; then the patcher again
	r.runs[1], r.runs[2] = r.runs[2], r.runs[1]
	cmp := r.comparisons(2)
	if len(cmp) != 2 || !cmp[0].patcherFirst || cmp[1].patcherFirst {
		t.Fatalf("comparisons %+v, want the patcher before, then after", cmp)
	}
	report := renderScenario(o, sc, []*scaleRun{r}, time.Now())
	header := cells(report, "Figure")
	if strings.Join(header, ",") != "controller,floor,zero-logic patcher (1 of 2),zero-logic patcher (2 of 2)" {
		t.Errorf("columns %v", header)
	}
	// 500 ms over 400 and 250 ms: 1.25× and 2×, median 1.625.
	if got := cells(report, "N=2 simultaneous changes: p99 ≤ 1.3×"); len(got) != 1 || !strings.HasPrefix(got[0], "**not met** (p99 1.62× (median of 2: 1.25–2.00×)") {
		t.Errorf("target %q", got)
	}
}

func TestEachControllerRoundIsComparedWithThePatcherRunsBesideIt(t *testing.T) {
	o := testOptions()
	o.scaleRounds = 2
	sc := scenarioNamed(o, "10k")
	if got := strings.Join(sc.programs, ","); got != "floor,zero-logic patcher,controller,zero-logic patcher,controller,zero-logic patcher" {
		t.Fatalf("programs %s", got)
	}
	if err := sc.validate(o); err != nil {
		t.Fatal(err)
	}
	sc.changes = []int{2}
	r := fixtureRun(o, sc)
	r.second = nil
	run := func(prog string, p99 int) *programRun {
		return &programRun{prog: prog, fanOut: []*phaseResult{fixturePhase(2, ms(50, p99))}}
	}
	// p99s: patcher 400, controller 500, patcher 250, controller 300, patcher 600.
	r.runs = []*programRun{r.program(progFloor), run(progPatcher, 400), run(progController, 500), run(progPatcher, 250),
		run(progController, 300), run(progPatcher, 600)}
	cmp := r.comparisons(2)
	var got []string
	for _, c := range cmp {
		got = append(got, fmt.Sprintf("%s %v %v/%v", c.where, c.patcherFirst, c.ctrl.latencies[1], c.patcher.latencies[1]))
	}
	want := []string{"run true 500ms/400ms", "run false 500ms/250ms", "run, controller 2 true 300ms/250ms", "run, controller 2 false 300ms/600ms"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("comparisons\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// 1.25×, 2×, 1.2×, 0.5×: the median of four is 1.225×.
	if p99, _, _ := r.fanOutRatios(2); p99.n != 4 || math.Abs(p99.median-1.225) > 1e-9 || p99.min != 0.5 || p99.max != 2 {
		t.Errorf("ratios %+v, want the median 1.225 of 4, 0.5–2", p99)
	}
	report := renderScenario(o, sc, []*scaleRun{r}, time.Now())
	if header := strings.Join(cells(report, "Figure"), ","); header != "controller (1 of 2),controller (2 of 2),floor,zero-logic patcher (1 of 3),zero-logic patcher (2 of 3),zero-logic patcher (3 of 3)" {
		t.Errorf("columns %v", header)
	}
}
