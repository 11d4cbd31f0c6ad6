package main

import (
	"os"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/hack/bench/trend"
)

// newTrendRun takes the headline figures of every harness scenario run.
func newTrendRun(version, machine string, began time.Time, runs []*scaleRun) trend.Run {
	// --version prints "restart-controller COMMIT"; the trend keeps COMMIT.
	if f := strings.Fields(version); len(f) > 0 {
		version = f[len(f)-1]
	}
	t := trend.Run{Commit: version, Date: began.UTC().Format(time.RFC3339), Machine: machine, Clean: true}
	for _, r := range runs {
		if r.others != "" {
			t.Clean = false
		}
		for _, p := range r.runs {
			res := trend.Result{
				Scenario: r.sc.name, Scale: r.scale, Program: p.prog,
				PeakRSSMiB:        round3(float64(p.total.hwm) / 1024),
				CPUToReadySeconds: round3(p.cpuReady),
				ReadySeconds:      round3(p.ready.Seconds()),
			}
			for _, ph := range p.fanOut {
				st := stats(ph.latencies)
				l := trend.Latency{Changes: ph.n, Missing: ph.missing}
				if st.n > 0 {
					l.P50Seconds, l.P99Seconds = round3(st.p50.Seconds()), round3(st.p99.Seconds())
				}
				if p.prog == progController {
					if p99, _, _ := r.fanOutRatios(ph.n); p99.n > 0 {
						l.Comparisons, l.P99RatioMedian, l.P99RatioMin, l.P99RatioMax = p99.n, round3(p99.median), round3(p99.min), round3(p99.max)
					}
				}
				res.FanOut = append(res.FanOut, l)
			}
			t.Results = append(t.Results, res)
		}
	}
	return t
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// recordTrend appends this run to --trend and redraws --plot from it.
func recordTrend(o options, runs []*scaleRun, began time.Time) error {
	if o.trend == "" || len(runs) == 0 {
		return nil
	}
	tf, err := trend.Append(o.trend, newTrendRun(o.version, machine(), began, runs))
	if err != nil {
		return err
	}
	logf("headline figures appended to %s", o.trend)
	if o.plot == "" {
		return nil
	}
	svg, err := trend.Plot(tf)
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.plot, svg, 0o644); err != nil {
		return err
	}
	logf("plot written to %s", o.plot)
	return nil
}
