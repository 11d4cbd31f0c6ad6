// Package fleet keeps the fleet's state in memory, one type that owns its
// lock: reservations of restarts the cache does not show yet, holds and
// workloads waiting for the cap on rollouts in flight (for the gauge and
// to wake them), when each source last changed (for the breaker), and the
// memoized wave evaluation of each source. A decision sees it through
// View (decision.FleetView).
package fleet

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// Catalog is what the fleet reads of the caches: the sources, the workloads
// and their records, and the indexes of readers and rollouts in flight.
type Catalog interface {
	decision.SourceLookup
	Workload(key catalog.WorkloadKey) (*catalog.WorkloadState, bool)
	WorkloadsReading(id catalog.SourceID) []catalog.WorkloadKey
	// InFlight lists the workloads whose last restart's rollout has no
	// result yet.
	InFlight() []catalog.WorkloadKey
}

// Fleet safety: rollout tracking, health-gated waves, the breaker, opt-outs.
//
// Everything that decides lives on the objects: the rollout record and the
// hold on each workload (package pacing), the release and ignore annotations
// on sources, and the sources' data (a change is named by its data). Wave
// progress is derived from the readers of a source: which already carry the
// change and how their rollouts ended. So a new process, after a SIGKILL or
// a failover, reaches the decisions the last one would have: it never
// releases a hold or restarts a held wave. What the controller keeps in
// memory may be lost without harm:
//
//   - reservations: restarts patched whose record the cache does not show
//     yet, so that two workers never both take the last place of a wave;
//   - when each source last changed, for the breaker's quiet time. A new
//     process takes its own start as that time, so it holds a workload at
//     least as long as the one before would have.
type Fleet struct {
	started time.Time
	// catalog holds the readers and their records; rules are the
	// decision's (they read the checksum key, loaded after New).
	catalog Catalog
	rules   func() decision.Rules

	mu         sync.Mutex
	lastChange map[catalog.SourceID]time.Time
	// lastChangePruned is the size of lastChange after its last pruning.
	lastChangePruned int
	reserved         map[catalog.WorkloadKey]reservation
	held             map[catalog.WorkloadKey]pacing.HoldKind
	// capped are workloads whose wave has a place for them but the cap on
	// rollouts in flight has not: each rollout that ends wakes them. (Those
	// waiting for their wave are woken by the rollouts of their source.)
	capped map[catalog.WorkloadKey]bool
	// waiting are workloads queued for a place in the wave of a source's
	// change, and how many wait on each source. Written ends wake them
	// through Movable; an unpaced restart's end, which is not written,
	// wakes them only when some wait (AnyWaiting): such a restart counts in
	// flight in a change that became paced after it, and a fan-out of
	// unpaced changes has none waiting.
	waiting   map[catalog.WorkloadKey]catalog.SourceID
	waitingOn map[catalog.SourceID]int
	nWaiting  atomic.Int64 // len(waiting), read without the lock
	// waves memoizes each source's wave evaluation, and readerOf names the
	// memos each workload is a reader in (wavememo.go).
	waves    map[catalog.SourceID]*waveMemo
	readerOf map[catalog.WorkloadKey][]catalog.SourceID
	// evicted is when evictIdle last scanned the memos.
	evicted time.Time
}

// Forget drops what is kept of a workload that is gone or opted out.
func (f *Fleet) Forget(key catalog.WorkloadKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, key)
	delete(f.capped, key)
	f.setWaiting(key, catalog.SourceID{})
	delete(f.reserved, key)
	f.touch(key, nil)
}

type reservation struct {
	record *pacing.LastRestart
	expiry time.Time
}

// reservationTTL bounds how long a reservation outlives its patch when the
// cache never shows the record (the workload was deleted meanwhile).
const reservationTTL = 2 * time.Minute

// New returns the fleet's state of a process started at now, reading the
// caches cat; rules are the decision's (they read the checksum key, loaded
// after the controller is built, hence a function).
func New(now time.Time, cat Catalog, rules func() decision.Rules) *Fleet {
	return &Fleet{
		started:    now,
		catalog:    cat,
		rules:      rules,
		lastChange: map[catalog.SourceID]time.Time{},
		reserved:   map[catalog.WorkloadKey]reservation{},
		held:       map[catalog.WorkloadKey]pacing.HoldKind{},
		capped:     map[catalog.WorkloadKey]bool{},
		waiting:    map[catalog.WorkloadKey]catalog.SourceID{},
		waitingOn:  map[catalog.SourceID]int{},
		waves:      map[catalog.SourceID]*waveMemo{},
		readerOf:   map[catalog.WorkloadKey][]catalog.SourceID{},
	}
}

// SourceChanged notes a change of the source. Entries older than quiet (the
// breaker's) are dropped once the map has doubled since it was last pruned:
// they decide nothing lastChanged's start-time floor would not, and a
// cluster whose 30,000 sources all change once must not keep them all.
func (f *Fleet) SourceChanged(id catalog.SourceID, now time.Time, quiet time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastChange[id] = now
	if len(f.lastChange) > 2*f.lastChangePruned+1024 {
		for k, t := range f.lastChange {
			if now.Sub(t) > quiet {
				delete(f.lastChange, k)
			}
		}
		f.lastChangePruned = len(f.lastChange)
	}
}

// lastChanged is when any of the sources last changed, as far as this
// process knows: never earlier than its start. Called with f.mu held.
func (f *Fleet) lastChanged(refs []catalog.Reference) time.Time {
	last := f.started
	for _, r := range refs {
		if t, ok := f.lastChange[r.ID]; ok && t.After(last) {
			last = t
		}
	}
	return last
}

// SetHeld records whether a workload's restart is held ("" when not) and
// returns the counts per reason for the gauge.
func (f *Fleet) SetHeld(key catalog.WorkloadKey, kind pacing.HoldKind) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if kind == "" {
		delete(f.held, key)
	} else {
		f.held[key] = kind
	}
	counts := map[string]int{}
	for _, k := range f.held {
		counts[string(k)]++
	}
	return counts
}

// SetWaitingForCap records whether a workload's wave has a place for it but
// the cap on rollouts in flight has not: each rollout that ends wakes it
// (Movable).
func (f *Fleet) SetWaitingForCap(key catalog.WorkloadKey, capped bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if capped {
		f.capped[key] = true
	} else {
		delete(f.capped, key)
	}
}

// setWaiting notes the source whose change's wave the workload waits for,
// or, given the zero SourceID, that it waits for none (View.SetWaiting).
// Called with f.mu held.
func (f *Fleet) setWaiting(key catalog.WorkloadKey, on catalog.SourceID) {
	if old, ok := f.waiting[key]; ok {
		if old == on {
			return
		}
		if f.waitingOn[old]--; f.waitingOn[old] <= 0 {
			delete(f.waitingOn, old)
		}
		delete(f.waiting, key)
	}
	if on != (catalog.SourceID{}) {
		f.waiting[key] = on
		f.waitingOn[on]++
	}
	f.nWaiting.Store(int64(len(f.waiting)))
}

// AnyWaiting reports whether a workload waits for the wave of a change of
// one of the sources (rollout records' "kind/namespace/name" IDs).
func (f *Fleet) AnyWaiting(sources map[string]string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waitingOn) == 0 {
		return false
	}
	for raw := range sources {
		if id, ok := decision.ParseSourceID(raw); ok && f.waitingOn[id] > 0 {
			return true
		}
	}
	return false
}

func (f *Fleet) cappedKeys() []catalog.WorkloadKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.capped))
}

// Unreserve drops a reservation whose patch failed (or was never sent).
func (f *Fleet) Unreserve(key catalog.WorkloadKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.reserved, key)
	f.touch(key, nil)
}

// recordOf returns the workload's rollout record: a reservation made by this
// process that the cache does not show yet, or the cached annotation. Called
// with f.mu held.
func (f *Fleet) recordOf(key catalog.WorkloadKey, w *catalog.WorkloadState, now time.Time) (rec *pacing.LastRestart, reserved bool) {
	cached, _ := pacing.ParseLastRestart(w.LastRestart)
	if r, ok := f.reserved[key]; ok {
		caughtUp := cached != nil && (cached.At.After(r.record.At) || cached.At.Equal(r.record.At) && cached.Result == r.record.Result)
		if caughtUp || now.After(r.expiry) {
			delete(f.reserved, key)
			f.touch(key, nil)
		} else {
			return r.record, true
		}
	}
	return cached, false
}

// reserve remembers a record this process is writing, until the cache shows
// it. Called with f.mu held.
func (f *Fleet) reserve(key catalog.WorkloadKey, rec *pacing.LastRestart, now time.Time) {
	f.reserved[key] = reservation{record: rec, expiry: now.Add(reservationTTL)}
	f.touch(key, nil)
}

// Behind reports whether the cache does not show yet a record this process
// wrote on the workload: deciding on it now would decide on a stale view.
// It returns how long until the reservation expires: the update event
// that the write causes ends the wait, and its expiry ends it if that event
// never comes (the workload was replaced meanwhile, say).
func (f *Fleet) Behind(key catalog.WorkloadKey, w *catalog.WorkloadState, now time.Time) (bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, reserved := f.recordOf(key, w, now); reserved {
		return true, f.reserved[key].expiry.Sub(now)
	}
	return false, 0
}

// inFlight counts the rollouts under way that the cap counts: records
// without a result in the cache, and reservations it does not show yet.
// Called with f.mu held.
func (f *Fleet) inFlight(now time.Time) int {
	keys := f.catalog.InFlight()
	n := len(keys)
	if len(f.reserved) == 0 {
		return n
	}
	// A set: during a fan-out both run to the thousands, and a scan of
	// keys for each reservation made this quadratic.
	counted := make(map[catalog.WorkloadKey]struct{}, len(keys))
	for _, key := range keys {
		counted[key] = struct{}{}
	}
	for key, r := range f.reserved {
		if now.After(r.expiry) || !r.record.InFlight() || !r.record.CountedInFlight() {
			continue
		}
		if _, ok := counted[key]; !ok {
			n++
		}
	}
	return n
}

// Movable lists, for each source a rollout that ended had delivered, the
// readers that may move now: those its waves admit, when the change is
// halted those to hold, and those held for another reason (whose hold may
// have ended: a breaker's quiet time passes without an event); and every
// workload waiting for the cap.
func (f *Fleet) Movable(sources map[string]string, now time.Time) []catalog.WorkloadKey {
	var keys []catalog.WorkloadKey
	f.mu.Lock()
	for raw := range sources {
		id, ok := decision.ParseSourceID(raw)
		if !ok {
			continue
		}
		src, ok := f.catalog.Source(id)
		if !ok {
			continue
		}
		byName, state := f.waveState(id, src, catalog.WorkloadKey{}, now)
		for _, name := range slices.Concat(state.Admit, state.Held, state.Elsewhere) {
			keys = append(keys, byName[name])
		}
	}
	f.mu.Unlock()
	return append(keys, f.cappedKeys()...)
}

// Reserve reserves a record this process wrote (a rollout's result), taking
// the lock: until the cache shows it, decisions read it from here.
func (f *Fleet) Reserve(key catalog.WorkloadKey, rec *pacing.LastRestart, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reserve(key, rec, now)
}

// waveState evaluates the waves of the source's current change over its
// readers, and maps member names back to keys (the map is shared: read it
// only). Called with f.mu held.
//
// self, when set, is the workload deciding, whose restart for the source is
// due. Of the others, those whose pending state the cache cannot tell (a
// large source whose keys they read it does not cover: only an API read
// would) are left out: they take their places when they decide themselves,
// as self, and count once restarted.
//
// The cached source object is evaluated through its memo (wavememo.go); a
// state given the keys one workload reads (a large source) is scanned.
func (f *Fleet) waveState(id catalog.SourceID, src *catalog.SourceState, self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, pacing.State) {
	change := src.Change(f.rules().Sums)
	released := src.Annotations[f.rules().Annotations.Release] == change
	if cached, ok := f.catalog.Source(id); ok && cached == src {
		return f.memoizedWaves(id, src, change, released, self, now)
	}
	byName, members := f.waveMembers(id, src, change, f.catalog.WorkloadsReading(id), self, now)
	return byName, f.rules().Waves.Evaluate(members, released)
}

// waveMembers reads the wave members among keys, readers of the source, for
// its change: those that take part (decision.Rules.Member), and their
// names. Called with f.mu held.
func (f *Fleet) waveMembers(id catalog.SourceID, src *catalog.SourceState, change string, keys []catalog.WorkloadKey,
	self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, []pacing.Member) {
	rules := f.rules()
	byName := map[string]catalog.WorkloadKey{}
	var members []pacing.Member
	for _, key := range keys {
		r, ok := f.catalog.Workload(key)
		if !ok {
			continue
		}
		rec, reserved := f.recordOf(key, r, now)
		m, ok := rules.Member(decision.Reader{Key: key, State: r, LastRestart: rec, Reserved: reserved, Self: key == self}, id, src, change)
		if !ok {
			continue
		}
		byName[m.Key] = key
		members = append(members, m)
	}
	return byName, members
}
