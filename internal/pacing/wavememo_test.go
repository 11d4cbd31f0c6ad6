package pacing

import (
	"fmt"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/decision/decisiontest"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// The memo follows every input of wave decisions: restarts and their
// reservations, rollout results, failures and holds, a release, a new
// change, readers that opt out, ignore the source, leave or arrive.
// checkMemo after each step compares it with a full scan.
func TestWaveMemoMatchesScan(t *testing.T) {
	h := newHarness(t, 12)
	check := h.checkMemo
	check("start")
	h.reserve(0) // a reservation the cache does not show
	check("first wave reserved")
	h.restarted(0)
	check("first wave cached")
	h.ended(0, rollout.ResultComplete, "")
	check("first wave result cached")
	h.reserve(1)
	h.reserve(2)
	check("second wave reserved")
	h.f.Unreserve(h.keys[2]) // its patch failed
	check("second wave, a patch failed")
	h.reserve(2)
	h.restarted(1)
	h.restarted(2)
	check("second wave cached")
	h.ended(1, rollout.ResultComplete, "")
	check("w01 complete")

	// w02 fails its deadline: the change halts and the rest are held.
	h.ended(2, rollout.ResultFailed, "ProgressDeadlineExceeded")
	check("w02 failed")
	for i := 3; i < 6; i++ {
		h.update(i, func(w *catalog.WorkloadState) {
			w.Hold = record.Encode(&record.Hold{Kind: record.HoldWave, Source: cmApp.String(), Change: h.change(), Cause: h.keys[2].String(), Since: h.now})
		})
	}
	check("held")

	// A reader opts out of the source, another leaves the cache, another
	// stops being opted in.
	h.update(5, func(w *catalog.WorkloadState) { w.IgnoreSources = []string{"app"} })
	check("w05 ignores app")
	gone := h.cat.workloads[h.keys[6]]
	delete(h.cat.workloads, h.keys[6])
	h.f.WorkloadCached(h.keys[6])
	h.f.Forget(h.keys[6])
	check("w06 gone")
	h.update(7, func(w *catalog.WorkloadState) { w.OptedIn = false })
	check("w07 not opted in")
	h.cat.workloads[h.keys[6]] = gone
	h.f.WorkloadCached(h.keys[6])
	check("w06 back")

	// The source object changes without a data change: its ignore
	// annotation takes every reader out of the waves, and back.
	ignored := decisiontest.SourceState(t, cmApp, dataV2)
	ignored.Annotations = map[string]string{ignoreKey: "true"}
	h.cat.sources[cmApp] = ignored
	check("source ignored, same data")
	h.f.mu.Lock()
	if _, state := h.f.waveState(cmApp, ignored, catalog.WorkloadKey{}, h.now); state.Reach != 0 {
		h.f.mu.Unlock()
		t.Fatalf("an ignored source's change reaches %d readers", state.Reach)
	}
	h.f.mu.Unlock()
	h.cat.sources[cmApp] = decisiontest.SourceState(t, cmApp, dataV2)
	check("source no longer ignored, same data")

	// The release: a new source object.
	src := decisiontest.SourceState(t, cmApp, dataV2)
	src.Annotations = map[string]string{releaseKey: src.Change(decisiontest.Sums)}
	h.cat.sources[cmApp] = src
	check("released")
	h.reserve(3)
	check("released, next wave reserved")
	h.restarted(3)
	check("released, next wave cached")

	// A new change starts over.
	h.cat.sources[cmApp] = decisiontest.SourceState(t, cmApp, map[string]string{"a": "3"})
	h.f.SourceChanged(cmApp, h.now)
	check("new change")
	h.reserve(0)
	check("new change, first wave reserved")
	h.restarted(0)
	check("new change, first wave cached")

	// Reservations (of a patch whose workload went, say) expire when the
	// cache never shows them.
	h.f.mu.Lock()
	for _, k := range h.keys[8:] {
		h.f.reserve(k, &record.LastRestart{At: h.now, Sources: map[string]string{cmApp.String(): "other"}}, h.now)
	}
	h.f.mu.Unlock()
	check("reserved")
	h.now = h.now.Add(reservationTTL + time.Second)
	check("reservations expired")
}

// The cost of a fan-out: each reader deciding reads a bounded number of
// readers, whatever their number, once the source's memo is built. Without
// the memo a decision reads every reader: N² for the fan-out of N.
func TestWaveDecisionsReadReadersOnce(t *testing.T) {
	perDecision := map[int]float64{}
	for _, n := range []int{100, 2000} {
		h := newHarness(t, n)
		for i := n - 1; i >= 0; i-- {
			l := h.f.Lock()
			facts := l.Facts(h.keys[i], nil, []catalog.SourceID{cmApp}, decision.Sources{cmApp: h.cat.sources[cmApp]}, h.now)
			if state := facts.Waves[cmApp]; i == 0 && len(state.Admit) != 1 {
				t.Fatalf("%d readers: first wave %v", n, state.Admit)
			}
			if i == 0 {
				l.Note(h.keys[i], decision.Verdict{Action: decision.Restart, At: h.now,
					LastRestart: &record.LastRestart{At: h.now, Sources: map[string]string{cmApp.String(): h.change()}}})
			}
			l.Unlock()
		}
		reads := h.cat.reads
		// The build reads every reader once; each decision reads itself,
		// and the restarted one is read again after its reservation.
		if reads > 3*n {
			t.Fatalf("%d readers: %d reads for %d decisions, want at most %d", n, reads, n, 3*n)
		}
		perDecision[n] = float64(reads) / float64(n)
	}
	t.Logf("reader reads per decision: %v", perDecision)
	if perDecision[2000] > 1.1*perDecision[100] {
		t.Fatalf("reads per decision grow with readers: %v", perDecision)
	}
}

// BenchmarkWaveDecision is one reader's wave decision among N readers of a
// source whose memo is built: it should not grow with N. The scan is the
// cost of every decision without the memo.
func BenchmarkWaveDecision(b *testing.B) {
	for _, n := range []int{100, 2000} {
		h := newHarness(b, n)
		src := h.cat.sources[cmApp]
		b.Run(fmt.Sprintf("memo/readers=%d", n), func(b *testing.B) {
			h.f.mu.Lock()
			defer h.f.mu.Unlock()
			h.f.waveState(cmApp, src, catalog.WorkloadKey{}, h.now) // builds the memo
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				h.f.waveState(cmApp, src, h.keys[i%n], h.now)
			}
		})
		b.Run(fmt.Sprintf("scan/readers=%d", n), func(b *testing.B) {
			h.f.mu.Lock()
			defer h.f.mu.Unlock()
			b.ReportAllocs()
			change := src.Change(decisiontest.Sums)
			for i := 0; b.Loop(); i++ {
				_, readers := h.f.readers(cmApp, src, change, h.cat.WorkloadsReading(cmApp), h.keys[i%n], h.now)
				decision.EvaluateWaves(rules().Waves, readers, false)
			}
		})
	}
}

// Idle memos are dropped when a memo is built, by a scan of them all made
// at most once per evictScan: a fan-out builds one memo per changed source,
// and a scan per build made it quadratic.
func TestIdleMemosEvictedByAThrottledScan(t *testing.T) {
	f := New(Deps{Started: t0, Rules: decision.Rules{Breaker: config.Breaker{Quiet: 2 * time.Minute}}})
	a := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "a"}
	b := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "b"}
	scanned := t0.Add(memoIdle + time.Second)
	f.waves[a] = &waveMemo{used: t0}
	f.evictIdle(scanned)
	if _, ok := f.waves[a]; ok {
		t.Fatal("a memo idle longer than memoIdle kept")
	}
	f.waves[b] = &waveMemo{used: t0}
	f.evictIdle(scanned.Add(time.Second))
	if _, ok := f.waves[b]; !ok {
		t.Fatal("scanned again within evictScan of the last scan")
	}
	f.evictIdle(scanned.Add(evictScan))
	if _, ok := f.waves[b]; ok {
		t.Fatal("an idle memo kept past the next scan")
	}
}
