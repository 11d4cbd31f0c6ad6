// Package memlimit keeps the Go runtime's soft memory limit a few times above
// the live heap. The controller's live heap is small (digests, not data), but
// decoding source objects makes garbage proportional to their size; without a
// limit the peak follows source bytes, with a fixed one a larger cluster would
// make the collector thrash. A limit that follows the live heap does neither.
package memlimit

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

const liveHeapMetric = "/gc/heap/live:bytes"

// Policy sets the limit to max(Floor, Factor × live heap).
type Policy struct {
	Floor  int64
	Factor float64
}

// Limit is the soft memory limit for a live heap of the given size.
func (p Policy) Limit(liveHeap uint64) int64 {
	scaled := p.Factor * float64(liveHeap)
	if scaled > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(p.Floor, int64(scaled))
}

// Limiter applies a policy that can be changed while it runs: the start-up
// sync, when every source is decoded at once, wants a tighter one than the
// steady state, when GC time competes with reacting to changes.
type Limiter struct {
	mu     sync.Mutex
	policy Policy
}

// NewLimiter returns a limiter starting with the given policy.
func NewLimiter(p Policy) *Limiter { return &Limiter{policy: p} }

// Set replaces the policy; Run applies it at its next tick.
func (l *Limiter) Set(p Policy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.policy = p
}

func (l *Limiter) current() Policy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.policy
}

// Run applies the policy now and every interval until ctx ends, then restores
// the limit found at start.
func (l *Limiter) Run(ctx context.Context, interval time.Duration) {
	previous := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(previous)
	sample := []metrics.Sample{{Name: liveHeapMetric}}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetMemoryLimit(l.current().Limit(sample[0].Value.Uint64()))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
