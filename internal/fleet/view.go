package fleet

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// View is the fleet as a decision sees it (decision.FleetView). It
// takes the fleet's lock at its first use, and the time with it, and keeps
// both until Unlock: the decision's wave places and the reservation of the
// restart's record happen under one lock.
type View struct {
	f      *Fleet
	clock  func() time.Time
	key    catalog.WorkloadKey
	locked bool
	now    time.Time
}

// View returns the fleet as the decision of the workload key sees it, its
// time read from clock when it takes the lock. The caller must Unlock it.
func (f *Fleet) View(clock func() time.Time, key catalog.WorkloadKey) *View {
	return &View{f: f, clock: clock, key: key}
}

func (v *View) lock() {
	if !v.locked {
		v.f.mu.Lock()
		v.locked, v.now = true, v.clock()
	}
}

// Unlock ends the decision's hold on the fleet: after the restart's record
// is reserved (Reserve), or once the verdict is anything else.
func (v *View) Unlock() {
	if v.locked {
		v.locked = false
		v.f.mu.Unlock()
	}
}

// Reserve reserves the restart's record, under the lock the decision took.
func (v *View) Reserve(rec *pacing.LastRestart, at time.Time) {
	v.lock()
	v.f.reserve(v.key, rec, at)
}

func (v *View) Now() time.Time { v.lock(); return v.now }

// SetWaiting is Fleet.SetWaiting under the decision's lock: a rollout that
// ends while the decision is made then finds it waiting (AnyWaiting).
func (v *View) SetWaiting(on catalog.SourceID) {
	if on == (catalog.SourceID{}) && !v.locked && v.f.nWaiting.Load() == 0 {
		// Nothing to clear (one decision per workload at a time: its own
		// entry cannot appear meanwhile), and most decisions of a fan-out
		// never take the lock.
		return
	}
	v.lock()
	v.f.setWaiting(v.key, on)
}

func (v *View) LastChange(refs []catalog.Reference) (time.Time, bool) {
	v.lock()
	return v.f.lastChanged(refs), true
}

func (v *View) Wave(id catalog.SourceID, src *catalog.SourceState) pacing.State {
	v.lock()
	_, state := v.f.waveState(id, src, v.key, v.now)
	return state
}

func (v *View) InFlight() int { v.lock(); return v.f.inFlight(v.now) }

func (v *View) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	return v.f.catalog.Source(id)
}
