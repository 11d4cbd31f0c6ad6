package fleet

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// Memoized wave decisions.
//
// Every decision of a reader of a source evaluates the waves of the source's
// current change over all its readers (waveState). Done from scratch, a
// change read by N workloads costs N member reads per decision, and the N
// decisions of its fan-out N² (2,000 readers: 4 million, each parsing
// annotations and hashing checksums). The evaluation is a pure function of
// cached state: the source object, the cached readers, and this process's
// reservations. So it is kept per source (waveMemo) and only the members
// whose inputs changed are read again:
//
//   - a cached workload changed, appeared or went (WorkloadChanged, which the
//     watcher calls for every update decisions see, and after the informer
//     has stored it): it is re-read in the memo of every source it read when
//     last read and of every source it reads now;
//   - a reservation of this process was made, dropped or expired (fleet.touch,
//     and the earliest expiry each memo keeps): its workload is re-read;
//   - the source object itself changed (any update: data, release or ignore
//     annotations) or the wave settings did: the memo is built again.
//
// Nothing here is state of record: dropping every memo changes no decision,
// only its cost. A lost invalidation is what would change one, hence the
// test that compares memoized states with a full scan after every step
// (TestWaveMemoMatchesScan).

// waveMemo is the wave evaluation of one source object's current change,
// and what it was computed from.
type waveMemo struct {
	// src is the cached source object it was built for; another object
	// (any update of the source) builds it again.
	src    *catalog.SourceState
	change string
	waves  pacing.Waves
	// readers are the workloads known to read the source, members or not
	// (not opted in, ignoring it, or pending state unknown).
	readers map[catalog.WorkloadKey]struct{}
	// members are those that take part, sorted by Key as Evaluate orders
	// them; byName maps their names back to keys.
	members []pacing.Member
	byName  map[string]catalog.WorkloadKey
	// dirty are readers (or possible new readers) to read again.
	dirty map[catalog.WorkloadKey]struct{}
	// expires is the earliest expiry of a reservation a member was read
	// with (zero: none): past it, the member reads differently.
	expires time.Time
	// state is Evaluate over members; evaluated is false once members
	// changed since.
	state     pacing.State
	evaluated bool
	released  bool
	used      time.Time
}

// memoIdle is how long a source's memo is kept without a decision reading
// it: a source changed once a day should not keep its readers' members.
const memoIdle = 10 * time.Minute

// memoizedWaves returns waveState for the cached source object src through
// its memo. Called with f.mu held.
func (f *Fleet) memoizedWaves(id catalog.SourceID, src *catalog.SourceState, change string, released bool,
	self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, pacing.State) {
	e := f.waves[id]
	if e == nil || e.src != src || e.change != change {
		e = f.buildWaveMemo(id, src, change, now)
	}
	e.used = now
	// The deciding workload first: reading it may drop a reservation it
	// has, which marks it dirty below.
	var mine []pacing.Member
	if self != (catalog.WorkloadKey{}) {
		_, mine = f.waveMembers(id, src, change, []catalog.WorkloadKey{self}, self, now)
	}
	if !e.expires.IsZero() && now.After(e.expires) {
		f.expireMemo(e, now)
	}
	f.refreshMemo(id, e, now)
	if !e.evaluated || e.released != released || e.waves != f.rules().Waves {
		e.waves, e.released = f.rules().Waves, released
		e.state = e.waves.Evaluate(e.members, released)
		// Callers get the memo's own state: clipped, an append to Admit
		// copies instead of writing into the memo's candidates.
		e.state.Admit, e.state.Held, e.state.Elsewhere = slices.Clip(e.state.Admit), slices.Clip(e.state.Held), slices.Clip(e.state.Elsewhere)
		e.evaluated = true
	}
	if self == (catalog.WorkloadKey{}) {
		return e.byName, e.state
	}
	// As self, a workload whose restart for the source is due counts as
	// pending even where its cached state cannot tell (see waveState). That
	// is nearly always what the memo read too; when not, this decision is
	// evaluated with its own member in place.
	name := self.String()
	i, found := e.index(name)
	switch {
	case len(mine) == 0 && !found, len(mine) == 1 && found && mine[0] == e.members[i]:
		return e.byName, e.state
	}
	members := slices.Clone(e.members)
	if found {
		members = slices.Delete(members, i, i+1)
	}
	byName := e.byName
	if len(mine) == 1 {
		members = append(members, mine[0])
		if _, ok := byName[name]; !ok {
			// The memo's map is shared: a copy with the deciding workload.
			byName = maps.Clone(byName)
			byName[name] = self
		}
	}
	return byName, f.rules().Waves.Evaluate(members, released)
}

// buildWaveMemo reads every reader of the source: the full scan, once per
// source object. Called with f.mu held.
func (f *Fleet) buildWaveMemo(id catalog.SourceID, src *catalog.SourceState, change string, now time.Time) *waveMemo {
	if old := f.waves[id]; old != nil {
		f.dropMemo(id, old)
	}
	f.evictIdle(now)
	e := &waveMemo{src: src, change: change, readers: map[catalog.WorkloadKey]struct{}{},
		byName: map[string]catalog.WorkloadKey{}, dirty: map[catalog.WorkloadKey]struct{}{}}
	f.waves[id] = e
	keys := f.catalog.WorkloadsReading(id)
	for _, key := range keys {
		e.readers[key] = struct{}{}
		f.readerOf[key] = append(f.readerOf[key], id)
	}
	byName, members := f.waveMembers(id, src, change, keys, catalog.WorkloadKey{}, now)
	slices.SortFunc(members, func(a, b pacing.Member) int { return strings.Compare(a.Key, b.Key) })
	e.members, e.byName = members, byName
	for _, m := range members {
		e.noteReservation(f, byName[m.Key])
	}
	// Reading members may have dropped reservations, marking them dirty:
	// they were read without them already.
	clear(e.dirty)
	return e
}

// refreshMemo reads again the dirty readers of a memo. Called with
// f.mu held.
func (f *Fleet) refreshMemo(id catalog.SourceID, e *waveMemo, now time.Time) {
	for len(e.dirty) > 0 {
		var key catalog.WorkloadKey
		for key = range e.dirty {
			break
		}
		delete(e.dirty, key)
		e.evaluated = false
		name := key.String()
		if i, ok := e.index(name); ok {
			e.members = slices.Delete(e.members, i, i+1)
			delete(e.byName, name)
		}
		w, ok := f.catalog.Workload(key)
		if !ok || !slices.ContainsFunc(w.References, func(r catalog.Reference) bool { return r.ID == id }) {
			if _, known := e.readers[key]; known {
				delete(e.readers, key)
				f.readerOf[key] = slices.DeleteFunc(f.readerOf[key], func(s catalog.SourceID) bool { return s == id })
				if len(f.readerOf[key]) == 0 {
					delete(f.readerOf, key)
				}
			}
			continue
		}
		if _, known := e.readers[key]; !known {
			e.readers[key] = struct{}{}
			f.readerOf[key] = append(f.readerOf[key], id)
		}
		// A dropped reservation marks the key dirty again: read once more.
		byName, mine := f.waveMembers(id, e.src, e.change, []catalog.WorkloadKey{key}, catalog.WorkloadKey{}, now)
		if len(mine) == 0 {
			continue
		}
		i, _ := e.index(mine[0].Key)
		e.members = slices.Insert(e.members, i, mine[0])
		e.byName[mine[0].Key] = byName[mine[0].Key]
		e.noteReservation(f, key)
	}
}

// expireMemo marks dirty the members whose reservation has expired by now,
// and finds the next expiry. Called with f.mu held.
func (f *Fleet) expireMemo(e *waveMemo, now time.Time) {
	e.expires = time.Time{}
	for _, m := range e.members {
		key := e.byName[m.Key]
		if r, ok := f.reserved[key]; ok && now.After(r.expiry) {
			e.dirty[key] = struct{}{}
			continue
		}
		e.noteReservation(f, key)
	}
}

// noteReservation keeps the earliest expiry of the reservations members
// were read with.
func (e *waveMemo) noteReservation(f *Fleet, key catalog.WorkloadKey) {
	if r, ok := f.reserved[key]; ok && (e.expires.IsZero() || r.expiry.Before(e.expires)) {
		e.expires = r.expiry
	}
}

// index finds a member by name: its place, or where it would go.
func (e *waveMemo) index(name string) (int, bool) {
	return slices.BinarySearchFunc(e.members, name, func(m pacing.Member, n string) int { return strings.Compare(m.Key, n) })
}

// touch marks a workload to be read again by every memo it is a reader in,
// and in those of the sources given (those it reads now). Called with f.mu
// held.
func (f *Fleet) touch(key catalog.WorkloadKey, reads []catalog.Reference) {
	for _, id := range f.readerOf[key] {
		if e := f.waves[id]; e != nil {
			e.dirty[key] = struct{}{}
		}
	}
	for _, r := range reads {
		if e := f.waves[r.ID]; e != nil {
			e.dirty[key] = struct{}{}
		}
	}
}

// dropMemo forgets a source's memo and its readers' back references.
// Called with f.mu held.
func (f *Fleet) dropMemo(id catalog.SourceID, e *waveMemo) {
	for key := range e.readers {
		f.readerOf[key] = slices.DeleteFunc(f.readerOf[key], func(s catalog.SourceID) bool { return s == id })
		if len(f.readerOf[key]) == 0 {
			delete(f.readerOf, key)
		}
	}
	delete(f.waves, id)
}

// evictScan is how often at most evictIdle scans the memos.
const evictScan = memoIdle / 10

// evictIdle drops the memos no decision has read for memoIdle: memory
// follows the sources being decided, not every source ever changed.
// Called with f.mu held, when a memo is built: once per source changed, so
// during a fan-out of N sources' changes it scans at most once per
// evictScan; a scan per build made the fan-out quadratic (N memos
// scanned N times), and a memo outlives its idle time by evictScan at most.
func (f *Fleet) evictIdle(now time.Time) {
	if now.Sub(f.evicted) < evictScan {
		return
	}
	f.evicted = now
	for id, e := range f.waves {
		if now.Sub(e.used) > memoIdle {
			f.dropMemo(id, e)
		}
	}
}

// workloadCached marks a workload that changed in the cache (or left it) to
// be read again by the wave memos it is in, or now reads the source of.
func (f *Fleet) WorkloadCached(key catalog.WorkloadKey) {
	var reads []catalog.Reference
	if w, ok := f.catalog.Workload(key); ok {
		reads = w.References
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.touch(key, reads)
}
