package main

import (
	"strings"
	"testing"
	"time"
)

func TestSlopesArePerAddedWorkload(t *testing.T) {
	run := func(workloads int, ctrlRSSMiB, floorRSSMiB int64, ctrlCPU float64) *scaleRun {
		sc := &scenario{name: "x"}
		return &scaleRun{sc: sc, scale: 1, objs: scaleSpec{workloads: workloads, sources: 3 * workloads}, runs: []*programRun{
			{prog: progFloor, hwmReady: floorRSSMiB << 10, cpuReady: 1},
			{prog: progController, hwmReady: ctrlRSSMiB << 10, cpuReady: ctrlCPU, total: procFigures{hwm: ctrlRSSMiB << 10},
				singles: &phaseResult{latencies: []time.Duration{10 * time.Millisecond}}},
		}}
	}
	// Given out of order: the table sorts by size.
	out := renderSlopes([]*scaleRun{run(10000, 80, 70, 6), run(2500, 50, 45, 1.5)})
	for _, want := range []string{
		"| figure | 2500 workloads | 10000 workloads | slope 2500→10000 |",
		// 30 MiB over 7,500 workloads: 4.10 KiB each.
		"| controller: peak RSS, whole run | 50.00 MiB | 80.00 MiB | 4.10 KiB/workload |",
		// 4.5 s over 7,500: 0.6 ms each.
		"| controller: CPU seconds to ready | 1.50 s | 6.00 s | 0.60 ms/workload |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("slopes lack %q:\n%s", want, out)
		}
	}
	if renderSlopes([]*scaleRun{run(10000, 80, 70, 6)}) != "" {
		t.Error("one size has no slope")
	}
}
