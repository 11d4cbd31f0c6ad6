package main

import (
	"time"
)

// testOptions are the defaults of the flags, without parsing them.
func testOptions() options {
	return options{
		configMaps: 8, configMapKB: 1, secrets: 8, secretKB: 1, deployments: 4,
		scales: []int{1, 4}, changes: []int{2, 4}, singles: 1, update: "put", grace: 2 * time.Second,
		creators: 2, updaters: 2, scaleWorkloads: 10, scaleSources: 30, scaleChanges: 5, scaleCreators: 2, scaleRounds: 2,
		xlWorkloads: 20, xlSources: 64, xlChanges: 5, xlCreators: 2, pairs: 3,
		largeSources: 1, largeKeys: 10, fleet: 2,
	}
}

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// fixturePhase is a fan-out of n changes, one per workload, whose latencies
// are lat.
func fixturePhase(n int, lat []time.Duration) *phaseResult {
	return &phaseResult{name: "fixture", n: n, changes: n, deps: n, restarts: n, once: n, maxPerDep: 1,
		latencies: lat, sinceDone: lat, returned: lat, patches: float64(n)}
}

// fixtureRun is the default scenario at scale 1 with fixed figures: the
// controller's N=2 p99 is 500 ms against the patcher's 400 ms (1.25×), its
// N=4 p99 300 ms against 100 ms (3×).
func fixtureRun(o options, sc *scenario) *scaleRun {
	r := &scaleRun{sc: sc, scale: 1, objs: sc.objects(o, 1), createDur: 3 * time.Second}
	r.runs = []*programRun{
		{prog: progFloor, ready: time.Second, cpuReady: 1, hwmReady: 20 << 10, steady: 19 << 10, heapInuse: 5 << 20,
			total: procFigures{hwm: 20 << 10, cpu: 1.5}},
		{prog: progController, ready: 2 * time.Second, readyz: 2 * time.Second, cpuReady: 1.2, hwmReady: 30 << 10, steady: 38 << 10,
			recorded: 4, recordDur: time.Second, heapInuse: 10 << 20,
			singles: &phaseResult{changes: 1, deps: 1, restarts: 1, once: 1, latencies: ms(15), returned: ms(5)},
			fanOut:  []*phaseResult{fixturePhase(2, ms(100, 500)), fixturePhase(4, ms(100, 200, 250, 300))},
			total:   procFigures{hwm: 36 << 10, cpu: 4}},
		{prog: progPatcher, ready: 500 * time.Millisecond, cpuReady: 0.3, hwmReady: 15 << 10,
			singles: &phaseResult{changes: 1, deps: 1, restarts: 1, once: 1, latencies: ms(10), returned: ms(5)},
			fanOut:  []*phaseResult{fixturePhase(2, ms(90, 400)), fixturePhase(4, ms(50, 60, 70, 100))},
			total:   procFigures{hwm: 16 << 10, cpu: 0.5}},
	}
	r.second = &graceStartFigures{ready: time.Second, readyz: time.Second,
		singles: &phaseResult{changes: 1, grace: 2 * time.Second, restarts: 1, latencies: ms(2020)}, proc: procFigures{hwm: 33 << 10}}
	return r
}

// scenarioNamed returns the table's scenario of that name.
func scenarioNamed(o options, name string) *scenario {
	for _, s := range scenarios(o) {
		if s.name == name {
			return s
		}
	}
	return nil
}
