package restart

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// checkMemo compares, for the deciding workload absent and for each reader
// as the deciding one, the memoized wave state of cmApp with a full scan of
// its readers: the memo must be a cache, never a decision of its own.
func (f *fleetHarness) checkMemo(step string) {
	f.t.Helper()
	src, ok := f.c.catalog.Source(cmApp)
	if !ok {
		f.t.Fatal("no source")
	}
	now := f.c.now()
	f.c.fleet.mu.Lock()
	defer f.c.fleet.mu.Unlock()
	released := src.Annotations[releaseKey] == src.Change(testSums)
	for _, self := range append([]catalog.WorkloadKey{{}}, f.keys...) {
		gotNames, got := f.c.fleet.waveState(cmApp, src, self, now)
		wantNames, members := f.c.fleet.waveMembers(cmApp, src, src.Change(testSums), f.c.catalog.WorkloadsReading(cmApp), self, now)
		want := f.c.cfg.Waves.Evaluate(members, released)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotNames, wantNames) {
			f.t.Fatalf("%s, deciding %q: memoized\n%+v\n%v\nscanned\n%+v\n%v", step, self.Name, got, gotNames, want, wantNames)
		}
	}
}

// The memo follows every input of wave decisions: restarts and their
// reservations, rollout results, failures and holds, a release, a new
// change, readers that opt out, ignore the source, leave or arrive.
// checkMemo after each step compares it with a full scan.
func TestWaveMemoMatchesScan(t *testing.T) {
	f := newFleetHarness(t, 12)
	check := f.checkMemo
	check("start")
	f.reconcileAll() // w00 restarted: a reservation the cache does not show
	check("first wave reserved")
	f.sync()
	check("first wave cached")
	f.rollOut("w00")
	f.step() // its result, reserved, then cached
	check("first wave result")
	f.sync()
	check("first wave result cached")
	f.step() // the second wave
	check("second wave reserved")
	f.sync()
	check("second wave cached")
	f.rollOut("w01")
	f.step()
	f.sync()
	check("w01 complete")

	// w02 fails its deadline: the change halts and the rest are held.
	f.c.now = func() time.Time { return reconcileNow.Add(11 * time.Minute) }
	f.step()
	check("w02 failed")
	f.step()
	f.sync()
	check("held")

	// A reader opts out of the source, another leaves the cache, another
	// stops being opted in.
	u := withAnnotations(f.get("w05"), map[string]string{ignoreSrcKey: "app"})
	f.cache(u)
	check("w05 ignores app")
	gone := f.keys[6]
	state, _ := f.c.catalog.Workload(gone)
	if err := f.workloads[deploymentsGVR].Delete(state); err != nil {
		t.Fatal(err)
	}
	f.c.WorkloadChanged(gone)
	check("w06 gone")
	u = f.get("w07")
	ann := u.GetAnnotations()
	delete(ann, optInKey)
	u.SetAnnotations(ann)
	f.cache(u)
	check("w07 not opted in")
	// w06 is back, as a new reader.
	f.cache(f.get("w06"))
	check("w06 back")

	// The source object changes without a data change: its ignore
	// annotation takes every reader out of the waves, and back.
	ignored := sourceState(t, cmApp, dataV2)
	ignored.Annotations = map[string]string{ignoreKey: "true"}
	if err := f.sources.Update(ignored); err != nil {
		t.Fatal(err)
	}
	check("source ignored, same data")
	f.c.fleet.mu.Lock()
	if _, state := f.c.fleet.waveState(cmApp, ignored, catalog.WorkloadKey{}, f.c.now()); state.Reach != 0 {
		f.c.fleet.mu.Unlock()
		t.Fatalf("an ignored source's change reaches %d readers", state.Reach)
	}
	f.c.fleet.mu.Unlock()
	if err := f.sources.Update(sourceState(t, cmApp, dataV2)); err != nil {
		t.Fatal(err)
	}
	check("source no longer ignored, same data")

	// The release: a new source object.
	src := sourceState(t, cmApp, dataV2)
	src.Annotations = map[string]string{releaseKey: src.Change(testSums)}
	if err := f.sources.Update(src); err != nil {
		t.Fatal(err)
	}
	check("released")
	f.step()
	check("released, next wave reserved")
	f.sync()
	check("released, next wave cached")

	// A new change starts over.
	f.setSource(map[string]string{"a": "3"})
	check("new change")
	f.step()
	check("new change, first wave reserved")
	f.sync()
	check("new change, first wave cached")

	// Reservations (of a patch whose workload went, say) expire when the
	// cache never shows them.
	f.c.fleet.mu.Lock()
	for _, k := range f.keys[8:] {
		f.c.fleet.reserve(k, &pacing.LastRestart{At: reconcileNow.Add(11 * time.Minute), Sources: map[string]string{cmApp.String(): "other"}},
			reconcileNow.Add(11*time.Minute))
	}
	f.c.fleet.mu.Unlock()
	check("reserved")
	f.c.now = func() time.Time { return reconcileNow.Add(11*time.Minute + reservationTTL + time.Second) }
	check("reservations expired")
}

// The cost of a fan-out: each reader deciding reads a bounded number of
// readers, whatever their number, once the source's memo is built. Without
// the memo a decision reads every reader: N² for the fan-out of N.
func TestWaveDecisionsReadReadersOnce(t *testing.T) {
	perDecision := map[int]float64{}
	for _, n := range []int{100, 2000} {
		f := newFleetHarness(t, n)
		counted := &countingCatalog{Catalog: f.c.fleet.catalog}
		f.c.fleet.catalog = counted
		if got := f.reconcileAll(); len(got) != 1 {
			t.Fatalf("%d readers: first wave %v", n, got)
		}
		reads := counted.reads
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
		f := newFleetHarness(b, n)
		src, _ := f.c.catalog.Source(cmApp)
		now := f.c.now()
		b.Run(fmt.Sprintf("memo/readers=%d", n), func(b *testing.B) {
			f.c.fleet.mu.Lock()
			defer f.c.fleet.mu.Unlock()
			f.c.fleet.waveState(cmApp, src, catalog.WorkloadKey{}, now) // builds the memo
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				f.c.fleet.waveState(cmApp, src, f.keys[i%n], now)
			}
		})
		b.Run(fmt.Sprintf("scan/readers=%d", n), func(b *testing.B) {
			f.c.fleet.mu.Lock()
			defer f.c.fleet.mu.Unlock()
			b.ReportAllocs()
			change := src.Change(testSums)
			for i := 0; b.Loop(); i++ {
				_, members := f.c.fleet.waveMembers(cmApp, src, change, f.c.catalog.WorkloadsReading(cmApp), f.keys[i%n], now)
				f.c.cfg.Waves.Evaluate(members, false)
			}
		})
	}
}

// countingCatalog counts the workloads the fleet reads from the cache: what
// the wave memo saves.
type countingCatalog struct {
	Catalog
	reads int
}

func (c *countingCatalog) Workload(key catalog.WorkloadKey) (*catalog.WorkloadState, bool) {
	c.reads++
	return c.Catalog.Workload(key)
}
