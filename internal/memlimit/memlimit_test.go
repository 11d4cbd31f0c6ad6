package memlimit

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	p := Policy{Floor: 32 << 20, Factor: 3}
	cases := []struct {
		live uint64
		want int64
	}{
		{0, 32 << 20},                   // start-up: the floor
		{10 << 20, 32 << 20},            // 3×10 MiB is below the floor
		{17 << 20, 51 << 20},            // the benchmark's catalog: three times it
		{400 << 20, 1200 << 20},         // a large cluster: never pinned to the floor
		{math.MaxUint64, math.MaxInt64}, // no overflow
	}
	for _, c := range cases {
		if got := p.Limit(c.live); got != c.want {
			t.Errorf("Limit(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

func TestRunSetsAndRestoresTheLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l := NewLimiter(Policy{Floor: 1 << 40, Factor: 0}, Manage{Limit: true}) // an unmistakable value
	go func() { l.Run(ctx, time.Millisecond); close(done) }()
	waitLimit := func(want int64) {
		deadline := time.Now().Add(10 * time.Second)
		for debug.SetMemoryLimit(-1) != want {
			if time.Now().After(deadline) {
				t.Fatalf("limit %d never applied", want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitLimit(1 << 40)
	l.Set(Policy{Floor: 1 << 41, Factor: 0})
	waitLimit(1 << 41)
	cancel()
	<-done
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("limit after Run = %d, want the original %d", got, before)
	}
}

func TestGrowthPercent(t *testing.T) {
	g := Growth{Headroom: 10 << 20, Min: 25, Max: 50}
	cases := []struct {
		live uint64
		want int
	}{
		{0, 50},         // nothing live yet: the most growth
		{13 << 20, 50},  // the default benchmark's catalog: 10 MiB is more than 50%
		{20 << 20, 50},  // where 10 MiB is 50%
		{32 << 20, 32},  // 10 MiB of 32, rounded up
		{42 << 20, 25},  // 10,000 workloads: 10 MiB would be 24%, the least is 25
		{400 << 20, 25}, // a large cluster: never below Min
	}
	for _, c := range cases {
		if got, ok := g.Percent(c.live); !ok || got != c.want {
			t.Errorf("Percent(%d MiB) = %d, %v, want %d", c.live>>20, got, ok, c.want)
		}
	}
	if _, ok := (Growth{}).Percent(42 << 20); ok {
		t.Error("a zero Growth sets a GC percent")
	}
}

// Run sets the growth's percent while it runs and restores the one it found.
func TestRunSetsAndRestoresTheGCPercent(t *testing.T) {
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	percent := func() int {
		s := []metrics.Sample{{Name: gcPercentMetric}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	run := func(m Manage, want int) { // a function: the test may grow more cases
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		// Headroom larger than any test heap: Max.
		l := NewLimiter(Policy{Floor: math.MaxInt64, Growth: Growth{Headroom: 1 << 40, Min: 10, Max: 33}}, m)
		go func() { l.Run(ctx, time.Millisecond); close(done) }()
		deadline := time.Now().Add(10 * time.Second)
		for percent() != want {
			if time.Now().After(deadline) {
				t.Fatalf("GC percent %d, want %d", percent(), want)
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
		if got := percent(); got != 77 {
			t.Fatalf("GC percent after Run = %d, want the original 77", got)
		}
	}
	run(Manage{Percent: true}, 33)
}
