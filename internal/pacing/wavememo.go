package pacing

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
)

// Memoized wave decisions.
//
// Every decision of a reader of a source evaluates the waves of the source's
// current change over all its readers (waveState). Done from scratch, a
// change read by N workloads costs N reader reads per decision, and the N
// decisions of its fan-out N² (2,000 readers: 4 million, each parsing
// annotations and hashing checksums). The evaluation is a pure function of
// cached state: the source object, the cached readers, and this process's
// reservations. So it is kept per source (waveMemo) and only the inWave
// whose inputs changed are read again:
//
//   - a cached workload changed, appeared or went (WorkloadCached, which
//     the controller's WorkloadChanged calls for every update decisions
//     see, after the informer has stored it): it is re-read in the memo of
//     every source it read when last read and of every source it reads now;
//   - a reservation of this process was made, dropped or expired (State.touch,
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
	waves  config.Waves
	// readers are the workloads known to read the source, inWave or not
	// (not opted in, ignoring it, or pending state unknown).
	readers map[catalog.WorkloadKey]struct{}
	// inWave are those that take part, sorted by Key as EvaluateWaves orders
	// them; byName maps their names back to keys.
	inWave []decision.Reader
	byName map[string]catalog.WorkloadKey
	// dirty are readers (or possible new readers) to read again.
	dirty map[catalog.WorkloadKey]struct{}
	// expires is the earliest time a reader reads differently (noteExpiry):
	// the expiry of a reservation it was read with, or the end of its wait
	// for its restart window or minimum interval; zero: none.
	expires time.Time
	// state is EvaluateWaves over inWave; evaluated is false once inWave
	// changed since.
	state     decision.WaveState
	evaluated bool
	released  bool
	used      time.Time
}

// memoIdle is how long a source's memo is kept without a decision reading
// it: a source changed once a day should not keep its readers' inWave.
const memoIdle = 10 * time.Minute

// memoizedWaves returns waveState for the cached source object src through
// its memo. Called with s.mu held.
func (s *State) memoizedWaves(id catalog.SourceID, src *catalog.SourceState, change string, released bool,
	self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, decision.WaveState) {
	e := s.waves[id]
	if e == nil || e.src != src || e.change != change {
		e = s.buildWaveMemo(id, src, change, now)
	}
	e.used = now
	// The deciding workload first: reading it may drop a reservation it
	// has, which marks it dirty below.
	var mine []decision.Reader
	if self != (catalog.WorkloadKey{}) {
		_, mine = s.readers(id, src, change, []catalog.WorkloadKey{self}, self, now)
	}
	if !e.expires.IsZero() && !now.Before(e.expires) {
		s.expireMemo(e, now)
	}
	s.refreshMemo(id, e, now)
	if !e.evaluated || e.released != released || e.waves != s.rules.Waves {
		e.waves, e.released = s.rules.Waves, released
		e.state = decision.EvaluateWaves(e.waves, e.inWave, released)
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
	// evaluated with its own reader in place.
	name := self.String()
	i, found := e.index(name)
	switch {
	case len(mine) == 0 && !found, len(mine) == 1 && found && mine[0] == e.inWave[i]:
		return e.byName, e.state
	}
	inWave := slices.Clone(e.inWave)
	if found {
		inWave = slices.Delete(inWave, i, i+1)
	}
	byName := e.byName
	if len(mine) == 1 {
		inWave = append(inWave, mine[0])
		if _, ok := byName[name]; !ok {
			// The memo's map is shared: a copy with the deciding workload.
			byName = maps.Clone(byName)
			byName[name] = self
		}
	}
	return byName, decision.EvaluateWaves(s.rules.Waves, inWave, released)
}

// buildWaveMemo reads every reader of the source: the full scan, once per
// source object. Called with s.mu held.
func (s *State) buildWaveMemo(id catalog.SourceID, src *catalog.SourceState, change string, now time.Time) *waveMemo {
	if old := s.waves[id]; old != nil {
		s.dropMemo(id, old)
	}
	s.evictIdle(now)
	e := &waveMemo{src: src, change: change, readers: map[catalog.WorkloadKey]struct{}{},
		byName: map[string]catalog.WorkloadKey{}, dirty: map[catalog.WorkloadKey]struct{}{}}
	s.waves[id] = e
	keys := s.catalog.WorkloadsReading(id)
	for _, key := range keys {
		e.readers[key] = struct{}{}
		s.readerOf[key] = append(s.readerOf[key], id)
	}
	byName, inWave := s.readers(id, src, change, keys, catalog.WorkloadKey{}, now)
	slices.SortFunc(inWave, func(a, b decision.Reader) int { return strings.Compare(a.Key, b.Key) })
	e.inWave, e.byName = inWave, byName
	for _, m := range inWave {
		e.noteExpiry(s, byName[m.Key], m)
	}
	// Reading inWave may have dropped reservations, marking them dirty:
	// they were read without them already.
	clear(e.dirty)
	return e
}

// refreshMemo reads again the dirty readers of a memo. Called with
// s.mu held.
func (s *State) refreshMemo(id catalog.SourceID, e *waveMemo, now time.Time) {
	for len(e.dirty) > 0 {
		var key catalog.WorkloadKey
		for key = range e.dirty {
			break
		}
		delete(e.dirty, key)
		e.evaluated = false
		name := key.String()
		if i, ok := e.index(name); ok {
			e.inWave = slices.Delete(e.inWave, i, i+1)
			delete(e.byName, name)
		}
		w, ok := s.catalog.Workload(key)
		if !ok || !slices.ContainsFunc(w.References, func(r catalog.Reference) bool { return r.ID == id }) {
			if _, known := e.readers[key]; known {
				delete(e.readers, key)
				s.readerOf[key] = slices.DeleteFunc(s.readerOf[key], func(s catalog.SourceID) bool { return s == id })
				if len(s.readerOf[key]) == 0 {
					delete(s.readerOf, key)
				}
			}
			continue
		}
		if _, known := e.readers[key]; !known {
			e.readers[key] = struct{}{}
			s.readerOf[key] = append(s.readerOf[key], id)
		}
		// A dropped reservation marks the key dirty again: read once more.
		byName, mine := s.readers(id, e.src, e.change, []catalog.WorkloadKey{key}, catalog.WorkloadKey{}, now)
		if len(mine) == 0 {
			continue
		}
		i, _ := e.index(mine[0].Key)
		e.inWave = slices.Insert(e.inWave, i, mine[0])
		e.byName[mine[0].Key] = byName[mine[0].Key]
		e.noteExpiry(s, key, mine[0])
	}
}

// expireMemo marks dirty the readers whose reservation has expired by now,
// or whose wait for their restart window or minimum interval is over, and
// finds the next expiry. Called with s.mu held.
func (s *State) expireMemo(e *waveMemo, now time.Time) {
	e.expires = time.Time{}
	for _, m := range e.inWave {
		key := e.byName[m.Key]
		if r, ok := s.reserved[key]; ok && now.After(r.expiry) || m.Waiting && !now.Before(m.WaitsUntil) {
			e.dirty[key] = struct{}{}
			continue
		}
		e.noteExpiry(s, key, m)
	}
}

// noteExpiry keeps the earliest time a reader reads differently: the
// expiry of the reservation it was read with, or the end of its wait.
func (e *waveMemo) noteExpiry(s *State, key catalog.WorkloadKey, m decision.Reader) {
	if r, ok := s.reserved[key]; ok && (e.expires.IsZero() || r.expiry.Before(e.expires)) {
		e.expires = r.expiry
	}
	if m.Waiting && (e.expires.IsZero() || m.WaitsUntil.Before(e.expires)) {
		e.expires = m.WaitsUntil
	}
}

// index finds a reader by name: its place, or where it would go.
func (e *waveMemo) index(name string) (int, bool) {
	return slices.BinarySearchFunc(e.inWave, name, func(m decision.Reader, n string) int { return strings.Compare(m.Key, n) })
}

// touch marks a workload to be read again by every memo it is a reader in,
// and in those of the sources given (those it reads now). Called with s.mu
// held.
func (s *State) touch(key catalog.WorkloadKey, reads []catalog.Reference) {
	for _, id := range s.readerOf[key] {
		if e := s.waves[id]; e != nil {
			e.dirty[key] = struct{}{}
		}
	}
	for _, r := range reads {
		if e := s.waves[r.ID]; e != nil {
			e.dirty[key] = struct{}{}
		}
	}
}

// dropMemo forgets a source's memo and its readers' back references.
// Called with s.mu held.
func (s *State) dropMemo(id catalog.SourceID, e *waveMemo) {
	for key := range e.readers {
		s.readerOf[key] = slices.DeleteFunc(s.readerOf[key], func(s catalog.SourceID) bool { return s == id })
		if len(s.readerOf[key]) == 0 {
			delete(s.readerOf, key)
		}
	}
	delete(s.waves, id)
}

// evictScan is how often at most evictIdle scans the memos.
const evictScan = memoIdle / 10

// evictIdle drops the memos no decision has read for memoIdle: memory
// follows the sources being decided, not every source ever changed.
// Called with s.mu held, when a memo is built: once per source changed, so
// during a fan-out of N sources' changes it scans at most once per
// evictScan; a scan per build made the fan-out quadratic (N memos
// scanned N times), and a memo outlives its idle time by evictScan at most.
func (s *State) evictIdle(now time.Time) {
	if now.Sub(s.evicted) < evictScan {
		return
	}
	s.evicted = now
	for id, e := range s.waves {
		if now.Sub(e.used) > memoIdle {
			s.dropMemo(id, e)
		}
	}
}

// WorkloadCached marks a workload that changed in the cache (or left it) to
// be read again by the wave memos it is in, or now reads the source of.
func (s *State) WorkloadCached(key catalog.WorkloadKey) {
	var reads []catalog.Reference
	if w, ok := s.catalog.Workload(key); ok {
		reads = w.References
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key, reads)
}
