package memlimit

import (
	"context"
	"math"
	"runtime/debug"
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
	l := NewLimiter(Policy{Floor: 1 << 40, Factor: 0}) // an unmistakable value
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
