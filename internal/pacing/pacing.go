// Package pacing keeps the pacing state in memory: what the controller
// knows of the fleet beyond the objects, and the facts a due restart's
// decision is paced by (decision.Pacing). Pacing is the waves, the cap on
// rollouts in flight and the breaker; their rules are gates of the decision,
// and everything they decide on lives on the objects: the rollout record
// and the hold on each workload, the release and ignore annotations on
// sources, the sources' data (a change is named by its data). So a new
// process, after a SIGKILL or a failover, reaches the decisions the last
// one would have. What is kept here may be lost without harm:
//
//   - reservations: records this process wrote that the cache does not show
//     yet, so that two workers never both take the last place of a wave,
//     and a workload is not decided on a view older than its own write;
//   - when each source last changed, for the breaker's quiet time. A new
//     process takes its own start as that time, so it holds a workload at
//     least as long as the one before would have;
//   - the workloads waiting for a wave or the cap, to wake them when a
//     rollout ends;
//   - the memoized wave evaluation of each source (wavememo.go).
//
// The lock is the controller's to take, visibly (Lock): around gathering
// the facts, deciding and reserving the restart's record.
package pacing

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
	"k8s.io/apimachinery/pkg/labels"
)

// Catalog is what pacing reads of the caches: the sources, the workloads
// and their records, and the indexes of readers and rollouts in flight.
type Catalog interface {
	Source(id catalog.SourceID) (*catalog.SourceState, bool)
	Workload(key catalog.WorkloadKey) (*catalog.WorkloadState, bool)
	WorkloadsReading(id catalog.SourceID) []catalog.WorkloadKey
	// InFlight lists the workloads whose last restart's rollout has no
	// result yet, and counts in flight (record.LastRestart.CountedInFlight).
	InFlight() []catalog.WorkloadKey
	// NamespaceLabels are a namespace's labels, for its restart window;
	// nil when not known.
	NamespaceLabels(namespace string) labels.Labels
}

// Deps are what the pacing state reads: the caches and the decision's
// rules, and when the process started.
type Deps struct {
	Catalog Catalog
	Rules   decision.Rules
	Started time.Time
}

// State is the pacing state of one process.
type State struct {
	started time.Time
	catalog Catalog
	rules   decision.Rules

	mu         sync.Mutex
	lastChange map[catalog.SourceID]time.Time
	// lastChangePruned is the size of lastChange after its last pruning.
	lastChangePruned int
	reserved         map[catalog.WorkloadKey]reservation
	// capped are workloads whose wave has a place for them but the cap on
	// rollouts in flight has not: each rollout that ends wakes them. (Those
	// waiting for their wave are woken by the rollouts of their source.)
	capped  map[catalog.WorkloadKey]bool
	nCapped atomic.Int64 // len(capped), read without the lock
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

type reservation struct {
	record *record.LastRestart
	expiry time.Time
}

// reservationTTL bounds how long a reservation outlives its patch when the
// cache never shows the record (the workload was deleted meanwhile).
const reservationTTL = 2 * time.Minute

// New returns the pacing state of a process.
func New(d Deps) *State {
	return &State{
		started:    d.Started,
		catalog:    d.Catalog,
		rules:      d.Rules,
		lastChange: map[catalog.SourceID]time.Time{},
		reserved:   map[catalog.WorkloadKey]reservation{},
		capped:     map[catalog.WorkloadKey]bool{},
		waiting:    map[catalog.WorkloadKey]catalog.SourceID{},
		waitingOn:  map[catalog.SourceID]int{},
		waves:      map[catalog.SourceID]*waveMemo{},
		readerOf:   map[catalog.WorkloadKey][]catalog.SourceID{},
	}
}

// Locked is the pacing state under its lock, held by one decision from
// gathering its facts to reserving its record: two decisions never both
// take the last place of a wave.
type Locked struct{ s *State }

// Lock takes the pacing lock; the caller must Unlock.
func (s *State) Lock() *Locked {
	s.mu.Lock()
	return &Locked{s: s}
}

// Unlock releases the pacing lock.
func (l *Locked) Unlock() { l.s.mu.Unlock() }

// Facts are the pacing facts of the workload key's due restart at now:
// when the sources it reads last changed, the waves of each change it would
// deliver (with it counted as due), and the rollouts in flight.
func (l *Locked) Facts(key catalog.WorkloadKey, refs []catalog.Reference, deliver []catalog.SourceID, sources decision.Sources, now time.Time) decision.Pacing {
	s := l.s
	p := decision.Pacing{Now: now, LastChange: s.lastChanged(refs), InFlight: s.inFlight(now),
		Waves: make(map[catalog.SourceID]decision.WaveState, len(deliver))}
	for _, id := range deliver {
		if src, ok := sources[id]; ok {
			_, p.Waves[id] = s.waveState(id, src, key, now)
		}
	}
	return p
}

// Note keeps what a paced decision of the workload key said: the record
// its restart writes (reserved until the cache shows it), the source
// whose wave it waits for, whether it waits for the cap.
func (l *Locked) Note(key catalog.WorkloadKey, v decision.Verdict) {
	s := l.s
	if v.Action == decision.Restart && v.LastRestart != nil {
		s.reserve(key, v.LastRestart, v.At)
	}
	s.setWaiting(key, v.WaitsFor)
	s.setCapped(key, v.Action == decision.Queue && v.Gate == decision.GateCap)
}

// setCapped notes whether the workload waits for the cap. Called with s.mu
// held.
func (s *State) setCapped(key catalog.WorkloadKey, capped bool) {
	if capped {
		s.capped[key] = true
	} else {
		delete(s.capped, key)
	}
	s.nCapped.Store(int64(len(s.capped)))
}

// Decided clears what an unpaced verdict leaves behind of the workload
// key's earlier waits: it waits for no wave and no cap now.
func (s *State) Decided(key catalog.WorkloadKey) {
	if s.nWaiting.Load() == 0 && s.nCapped.Load() == 0 {
		// Nothing to clear (one decision per workload at a time: its own
		// entry cannot appear meanwhile), and most decisions of a fan-out
		// never take the lock.
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setWaiting(key, catalog.SourceID{})
	s.setCapped(key, false)
}

// Forget drops what is kept of a workload that is gone or opted out.
func (s *State) Forget(key catalog.WorkloadKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setCapped(key, false)
	s.setWaiting(key, catalog.SourceID{})
	delete(s.reserved, key)
	s.touch(key, nil)
}

// SourceChanged notes a change of the source. Entries older than the
// breaker's quiet time are dropped once the map has doubled since it was
// last pruned: they decide nothing lastChanged's start-time floor would
// not, and a cluster whose 30,000 sources all change once must not keep
// them all.
func (s *State) SourceChanged(id catalog.SourceID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastChange[id] = now
	if len(s.lastChange) > 2*s.lastChangePruned+1024 {
		for k, t := range s.lastChange {
			if now.Sub(t) > s.rules.Breaker.Quiet {
				delete(s.lastChange, k)
			}
		}
		s.lastChangePruned = len(s.lastChange)
	}
}

// lastChanged is when any of the sources last changed, as far as this
// process knows: never earlier than its start. Called with s.mu held.
func (s *State) lastChanged(refs []catalog.Reference) time.Time {
	last := s.started
	for _, r := range refs {
		if t, ok := s.lastChange[r.ID]; ok && t.After(last) {
			last = t
		}
	}
	return last
}

// setWaiting notes the source whose change's wave the workload waits for,
// or, given the zero SourceID, that it waits for none. Called with s.mu
// held.
func (s *State) setWaiting(key catalog.WorkloadKey, on catalog.SourceID) {
	if old, ok := s.waiting[key]; ok {
		if old == on {
			return
		}
		if s.waitingOn[old]--; s.waitingOn[old] <= 0 {
			delete(s.waitingOn, old)
		}
		delete(s.waiting, key)
	}
	if on != (catalog.SourceID{}) {
		s.waiting[key] = on
		s.waitingOn[on]++
	}
	s.nWaiting.Store(int64(len(s.waiting)))
}

// AnyWaiting reports whether a workload waits for the wave of a change of
// one of the sources (rollout records' "kind/namespace/name" IDs).
func (s *State) AnyWaiting(sources map[string]string) bool {
	if s.nWaiting.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for raw := range sources {
		if id, ok := catalog.ParseSourceID(raw); ok && s.waitingOn[id] > 0 {
			return true
		}
	}
	return false
}

// Unreserve drops a reservation whose write failed (or was never sent).
func (s *State) Unreserve(key catalog.WorkloadKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reserved, key)
	s.touch(key, nil)
}

// Reserve reserves a record this process wrote (a rollout's result): until
// the cache shows it, decisions read it from here.
func (s *State) Reserve(key catalog.WorkloadKey, rec *record.LastRestart, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserve(key, rec, now)
}

// reserve remembers a record this process is writing, until the cache shows
// it. Called with s.mu held.
func (s *State) reserve(key catalog.WorkloadKey, rec *record.LastRestart, now time.Time) {
	s.reserved[key] = reservation{record: rec, expiry: now.Add(reservationTTL)}
	s.touch(key, nil)
}

// recordOf returns the workload's rollout record: a reservation made by this
// process that the cache does not show yet, or cached, the one the cache
// holds. Called with s.mu held.
func (s *State) recordOf(key catalog.WorkloadKey, cached *record.LastRestart, now time.Time) (rec *record.LastRestart, reserved bool) {
	if r, ok := s.reserved[key]; ok {
		caughtUp := cached != nil && (cached.At.After(r.record.At) || cached.At.Equal(r.record.At) && cached.Result == r.record.Result)
		if caughtUp || now.After(r.expiry) {
			delete(s.reserved, key)
			s.touch(key, nil)
		} else {
			return r.record, true
		}
	}
	return cached, false
}

// OwnWrite returns, when the cache does not show yet a record this process
// wrote on the workload (whose cached record is cached), when that
// reservation expires: deciding before would decide on a stale view. The
// update event that the write causes ends the wait, and the expiry ends it
// if that event never comes (the workload was replaced meanwhile, say).
// Zero when there is none.
func (s *State) OwnWrite(key catalog.WorkloadKey, cached *record.LastRestart, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, reserved := s.recordOf(key, cached, now); reserved {
		return s.reserved[key].expiry
	}
	return time.Time{}
}

// inFlight counts the rollouts under way that the cap counts: records
// without a result in the cache, and reservations it does not show yet.
// Called with s.mu held.
func (s *State) inFlight(now time.Time) int {
	keys := s.catalog.InFlight()
	n := len(keys)
	if len(s.reserved) == 0 {
		return n
	}
	// A set: during a fan-out both run to the thousands, and a scan of
	// keys for each reservation made this quadratic.
	counted := make(map[catalog.WorkloadKey]struct{}, len(keys))
	for _, key := range keys {
		counted[key] = struct{}{}
	}
	for key, r := range s.reserved {
		if now.After(r.expiry) || !r.record.CountedInFlight() {
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
func (s *State) Movable(sources map[string]string, now time.Time) []catalog.WorkloadKey {
	var keys []catalog.WorkloadKey
	s.mu.Lock()
	defer s.mu.Unlock()
	for raw := range sources {
		id, ok := catalog.ParseSourceID(raw)
		if !ok {
			continue
		}
		src, ok := s.catalog.Source(id)
		if !ok {
			continue
		}
		byName, state := s.waveState(id, src, catalog.WorkloadKey{}, now)
		for _, name := range slices.Concat(state.Admit, state.Held, state.Elsewhere) {
			keys = append(keys, byName[name])
		}
	}
	return append(keys, slices.Collect(maps.Keys(s.capped))...)
}

// waveState evaluates the waves of the source's current change over its
// readers, and maps reader names back to keys (the map is shared: read it
// only). Called with s.mu held.
//
// self, when set, is the workload deciding, whose restart for the source is
// due. Of the others, those whose pending state the cache cannot tell (a
// large source whose keys they read it does not cover: only an API read
// would) are left out: they take their places when they decide themselves,
// as self, and count once restarted.
//
// The cached source object is evaluated through its memo (wavememo.go); a
// state given the keys one workload reads (a large source) is scanned.
func (s *State) waveState(id catalog.SourceID, src *catalog.SourceState, self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, decision.WaveState) {
	change := src.Change(s.rules.Sums)
	released := src.Annotations[s.rules.Annotations.Release] == change
	if cached, ok := s.catalog.Source(id); ok && cached == src {
		return s.memoizedWaves(id, src, change, released, self, now)
	}
	byName, readers := s.readers(id, src, change, s.catalog.WorkloadsReading(id), self, now)
	return byName, decision.EvaluateWaves(s.rules.Waves, readers, released)
}

// readers reads the wave readers among keys, readers of the source, for its
// change: those that take part (decision.Rules.ReaderOf), and their names.
// Called with s.mu held.
func (s *State) readers(id catalog.SourceID, src *catalog.SourceState, change string, keys []catalog.WorkloadKey,
	self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, []decision.Reader) {
	byName := map[string]catalog.WorkloadKey{}
	var out []decision.Reader
	for _, key := range keys {
		cached, ok := s.catalog.Workload(key)
		if !ok {
			continue
		}
		w := decision.ReadWorkload(cached)
		var reserved bool
		w.LastRestart, reserved = s.recordOf(key, w.LastRestart, now)
		rd, ok := s.rules.ReaderOf(key, w, reserved, key == self, id, src, change, s.catalog.NamespaceLabels(key.Namespace), now)
		if !ok {
			continue
		}
		byName[rd.Key] = key
		out = append(out, rd)
	}
	return byName, out
}
