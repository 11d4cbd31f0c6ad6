// Package memlimit keeps the Go runtime's soft memory limit a few times above
// the live heap, and, once the caches hold a large live heap, collects at a
// smaller growth. The controller's live heap is small (digests, not data),
// but decoding source objects makes garbage proportional to their size;
// without a limit the peak follows source bytes, with a fixed one a larger
// cluster would make the collector thrash. A limit that follows the live
// heap does neither. A large live heap is the cache of a large cluster: GC
// at 50% growth lets its heap reach half as much again, garbage the caches'
// size alone brings, so growth there is capped by headroom in bytes rather
// than by a share of the cache.
package memlimit

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

const (
	liveHeapMetric  = "/gc/heap/live:bytes"
	gcPercentMetric = "/gc/gogc:percent"
)

// Policy sets the limit to max(Floor, Factor × live heap) and, when Growth
// is set, the GC percent (Growth.Percent).
type Policy struct {
	Floor  int64
	Factor float64
	Growth Growth
}

// Growth sets the GC percent that lets the heap grow by Headroom bytes over
// the live heap, kept within [Min, Max] percent. The percent counts the
// heap alone, unlike the soft limit, which counts the runtime's own memory
// too: a limit set close above the live heap sits below the heap's own
// overhead and makes the collector run without pause (BENCHMARKS.md), a
// percent cannot. A zero Headroom leaves the GC percent alone.
type Growth struct {
	Headroom uint64
	Min, Max int
}

// Limit is the soft memory limit for a live heap of the given size.
func (p Policy) Limit(liveHeap uint64) int64 {
	scaled := p.Factor * float64(liveHeap)
	if scaled > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(p.Floor, int64(scaled))
}

// Percent is the GC percent for a live heap of the given size, and false
// when the growth is not set.
func (g Growth) Percent(liveHeap uint64) (int, bool) {
	if g.Headroom == 0 {
		return 0, false
	}
	if liveHeap == 0 {
		return g.Max, true
	}
	pct := math.Ceil(100 * float64(g.Headroom) / float64(liveHeap))
	return int(min(max(pct, float64(g.Min)), float64(g.Max))), true
}

// Manage says what a Limiter sets: an operator's GOMEMLIMIT or GOGC is
// theirs to keep.
type Manage struct {
	Limit, Percent bool
}

// Limiter applies a policy that can be changed while it runs: the start-up
// sync, when every source is decoded at once, wants a tighter one than the
// steady state, when GC time competes with reacting to changes.
type Limiter struct {
	mu     sync.Mutex
	policy Policy
	manage Manage
}

// NewLimiter returns a limiter starting with the given policy, setting what
// manage says.
func NewLimiter(p Policy, manage Manage) *Limiter { return &Limiter{policy: p, manage: manage} }

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
// the limit and the GC percent found at start.
func (l *Limiter) Run(ctx context.Context, interval time.Duration) {
	if l.manage.Limit {
		previous := debug.SetMemoryLimit(-1)
		defer debug.SetMemoryLimit(previous)
	}
	percent := -2 // what this limiter last set; -2: nothing yet
	if l.manage.Percent {
		// Read, not set: setting -1 to learn it would stop collections.
		gogc := []metrics.Sample{{Name: gcPercentMetric}}
		metrics.Read(gogc)
		if gogc[0].Value.Kind() == metrics.KindUint64 {
			previous := int(gogc[0].Value.Uint64())
			defer func() {
				if percent != -2 {
					debug.SetGCPercent(previous)
				}
			}()
		}
	}
	sample := []metrics.Sample{{Name: liveHeapMetric}}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live, p := sample[0].Value.Uint64(), l.current()
			if l.manage.Limit {
				debug.SetMemoryLimit(p.Limit(live))
			}
			if pct, ok := p.Growth.Percent(live); ok && l.manage.Percent && pct != percent {
				debug.SetGCPercent(pct)
				percent = pct
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
