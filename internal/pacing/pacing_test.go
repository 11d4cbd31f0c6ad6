package pacing

import (
	"fmt"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// The breaker's record of when each source last changed drops entries older
// than the quiet time once it has grown: a fleet of sources that each
// changed once must not stay in memory.
func TestLastChangeIsPruned(t *testing.T) {
	f := New(Deps{Started: t0, Rules: decision.Rules{Breaker: config.Breaker{Quiet: 2 * time.Minute}}})
	quiet := 2 * time.Minute
	id := func(i int) catalog.SourceID {
		return catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: fmt.Sprint(i)}
	}
	for i := range 1025 {
		f.SourceChanged(id(i), t0)
	}
	t1 := t0.Add(quiet + time.Second)
	for i := 1025; i < 3075; i++ {
		f.SourceChanged(id(i), t1)
	}
	if n := len(f.lastChange); n != 2050 {
		t.Fatalf("%d sources kept, want the 2050 changed within the quiet time", n)
	}
	// What the breaker reads is unchanged: an old change is as quiet as
	// the process's start.
	if got := f.lastChanged([]catalog.Reference{{ID: id(0)}}); !got.Equal(t0) {
		t.Errorf("last change of a pruned source %v, want the start %v", got, t0)
	}
	if got := f.lastChanged([]catalog.Reference{{ID: id(0)}, {ID: id(3000)}}); !got.Equal(t1) {
		t.Errorf("last change %v, want %v", got, t1)
	}
}

// The cap on rollouts in flight counts paced rollouts: records in flight in
// the cache, and reservations it does not show yet that are in flight and
// paced. Not a reservation of an unpaced restart (its end goes unwritten),
// nor one of a result, nor one counted already from the cache.
func TestInFlightCountsPacedRollouts(t *testing.T) {
	h := newHarness(t, 6)
	h.restarted(0) // in the cache, in flight
	at := func(i int, rec *record.LastRestart) {
		h.f.Reserve(h.keys[i], rec, h.now)
	}
	at(0, &record.LastRestart{At: h.now})
	at(1, &record.LastRestart{At: h.now})
	at(2, &record.LastRestart{At: h.now, Unpaced: true})
	at(3, &record.LastRestart{At: h.now, Result: rollout.ResultComplete})
	at(4, &record.LastRestart{At: h.now, Unpaced: true, Job: "j"})
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if n := h.f.inFlight(h.now); n != 3 {
		t.Fatalf("%d in flight, want 3 (w00 cached, w01 and w04 reserved)", n)
	}
}

// The workloads waiting for a wave are counted per source: a decision that
// waits notes its source, a later one that does not clears it, and so does
// Forget. AnyWaiting reads rollout records' source IDs.
func TestWaitingForAWave(t *testing.T) {
	f := New(Deps{Started: t0, Rules: decision.Rules{Breaker: config.Breaker{Quiet: 2 * time.Minute}}})
	w := func(i int) catalog.WorkloadKey {
		return catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "shop", Name: fmt.Sprintf("w%02d", i)}
	}
	cmOther := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "other"}
	decide := func(key catalog.WorkloadKey, on catalog.SourceID) {
		l := f.Lock()
		defer l.Unlock()
		l.Note(key, decision.Verdict{Action: decision.Queue, WaitsFor: on})
	}
	app, other := map[string]string{cmApp.String(): "c1"}, map[string]string{cmOther.String(): "c1"}
	if f.AnyWaiting(app) {
		t.Fatal("waiting before any decision")
	}
	decide(w(0), cmApp)
	decide(w(1), cmApp)
	if !f.AnyWaiting(app) || f.AnyWaiting(other) {
		t.Fatalf("after two wait for app: app %v, other %v", f.AnyWaiting(app), f.AnyWaiting(other))
	}
	decide(w(0), catalog.SourceID{}) // restarted, say
	if !f.AnyWaiting(app) {
		t.Fatal("w01 still waits for app")
	}
	decide(w(1), cmOther) // now waits for the other source
	if f.AnyWaiting(app) || !f.AnyWaiting(other) {
		t.Fatalf("after w01 moved: app %v, other %v", f.AnyWaiting(app), f.AnyWaiting(other))
	}
	f.Forget(w(1))
	if f.AnyWaiting(other) || len(f.waiting) != 0 || len(f.waitingOn) != 0 || f.nWaiting.Load() != 0 {
		t.Fatalf("after Forget: %v %v %d", f.waiting, f.waitingOn, f.nWaiting.Load())
	}
}
