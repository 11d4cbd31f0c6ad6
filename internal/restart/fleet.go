package restart

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/pacing"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

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
type fleet struct {
	started time.Time

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
	// waves memoizes each source's wave evaluation, and readerOf names the
	// memos each workload is a reader in (wavememo.go).
	waves    map[catalog.SourceID]*waveMemo
	readerOf map[catalog.WorkloadKey][]catalog.SourceID
	// memberReads counts readers read for wave decisions: what the memo
	// saves (tests assert it).
	memberReads int
}

// trustedApplied returns the workload's applied checksums, or nil when
// they cannot be trusted: none, unreadable, or recorded against another pod
// template (see pendingFor). Parsed on each call rather than kept: with the
// wave memo a workload is read once per change of what decisions see, and a
// parsed copy of every workload's annotations was 16% of the heap at 10,000
// workloads (issue 13).
func trustedApplied(w *catalog.WorkloadState) map[string]string {
	if !w.HasApplied {
		return nil
	}
	if rec := parseTemplateRecord(w.AppliedTemplateHash); rec.hash == "" || rec.hash != w.TemplateHash {
		return nil
	}
	applied := map[string]string{}
	if json.Unmarshal([]byte(w.Applied), &applied) != nil {
		return nil
	}
	return applied
}

// forget drops what is kept of a workload that is gone or opted out.
func (f *fleet) forget(key catalog.WorkloadKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, key)
	delete(f.capped, key)
	delete(f.reserved, key)
	f.touch(key, nil)
}

type reservation struct {
	record *pacing.Record
	expiry time.Time
}

// reservationTTL bounds how long a reservation outlives its patch when the
// cache never shows the record (the workload was deleted meanwhile).
const reservationTTL = 2 * time.Minute

// queuedRecheck is how often a workload waiting for its wave is decided
// again even if no rollout ending woke it.
const queuedRecheck = 30 * time.Second

func newFleet(now time.Time) *fleet {
	return &fleet{
		started:    now,
		lastChange: map[catalog.SourceID]time.Time{},
		reserved:   map[catalog.WorkloadKey]reservation{},
		held:       map[catalog.WorkloadKey]pacing.HoldKind{},
		capped:     map[catalog.WorkloadKey]bool{},
		waves:      map[catalog.SourceID]*waveMemo{},
		readerOf:   map[catalog.WorkloadKey][]catalog.SourceID{},
	}
}

// changed notes a change of the source. Entries older than quiet (the
// breaker's) are dropped once the map has doubled since it was last pruned:
// they decide nothing lastChanged's start-time floor would not, and a
// cluster whose 30,000 sources all change once must not keep them all.
func (f *fleet) changed(id catalog.SourceID, now time.Time, quiet time.Duration) {
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
// process knows: never earlier than its start.
func (f *fleet) lastChanged(refs []catalog.Reference) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.started
	for _, r := range refs {
		if t, ok := f.lastChange[r.ID]; ok && t.After(last) {
			last = t
		}
	}
	return last
}

// setHeld records whether a workload's restart is held ("" when not) and
// returns the counts per reason for the gauge.
func (f *fleet) setHeld(key catalog.WorkloadKey, kind pacing.HoldKind) map[string]int {
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

func (f *fleet) setCapped(key catalog.WorkloadKey, capped bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if capped {
		f.capped[key] = true
	} else {
		delete(f.capped, key)
	}
}

func (f *fleet) cappedKeys() []catalog.WorkloadKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.capped))
}

// unreserve drops a reservation whose patch failed (or was never sent).
func (f *fleet) unreserve(key catalog.WorkloadKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.reserved, key)
	f.touch(key, nil)
}

// recordOf returns the workload's rollout record: a reservation made by this
// process that the cache does not show yet, or the cached annotation. Called
// with f.mu held.
func (f *fleet) recordOf(key catalog.WorkloadKey, w *catalog.WorkloadState, now time.Time) (rec *pacing.Record, reserved bool) {
	cached, _ := pacing.ParseRecord(w.Record)
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
func (f *fleet) reserve(key catalog.WorkloadKey, rec *pacing.Record, now time.Time) {
	f.reserved[key] = reservation{record: rec, expiry: now.Add(reservationTTL)}
	f.touch(key, nil)
}

// behind reports whether the cache does not show yet a record this process
// wrote on the workload: deciding on it now would decide on a stale view.
func (f *fleet) behind(key catalog.WorkloadKey, w *catalog.WorkloadState, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, reserved := f.recordOf(key, w, now)
	return reserved
}

// inFlight counts the rollouts under way: records without a result in the
// cache, and reservations it does not show yet. Called with f.mu held.
func (c *Controller) inFlight(now time.Time) int {
	keys := c.catalog.InFlight()
	n := len(keys)
	for key, r := range c.fleet.reserved {
		if now.After(r.expiry) {
			continue
		}
		if !slices.Contains(keys, key) {
			n++
		}
	}
	return n
}

// SourceAnnotated is called by the watcher when a source's release or ignore
// annotation changed: its readers are decided again at once.
func (c *Controller) SourceAnnotated(id catalog.SourceID) {
	for _, key := range c.catalog.WorkloadsReading(id) {
		c.queue.Add(key)
	}
}

// follow judges the rollout of the workload's last restart, if it is still
// followed, and records its outcome on the workload once there is one. It
// reports whether it wrote: the decision then waits for the cache to show
// the write (the update enqueues the workload again).
func (c *Controller) follow(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, now time.Time) (bool, error) {
	rec, err := pacing.ParseRecord(w.Record)
	if err != nil {
		c.log.Warn("unreadable rollout record; the next restart replaces it", "workload", key.String(), "error", err)
		return false, nil
	}
	status := w.Rollout
	if w.NotRolled != "" {
		status = rollout.Status{Phase: rollout.NotRolling, Reason: "NotRolled", Message: w.NotRolled}
	}
	if rec != nil && rec.Result == rollout.Unsucceeded && status.Phase == rollout.Complete {
		return true, c.recovered(ctx, key, w, rec, now)
	}
	if !rec.InFlight() {
		return false, nil
	}
	verdict := c.rules[key.Resource].Judge(status, rec.At, now)
	if verdict.Result == rollout.Pending {
		// The deadline: decide again then, if no status change comes first.
		c.queue.AddAfter(key, verdict.Wait+10*time.Millisecond)
		return false, nil
	}
	done := rec.WithResult(verdict, now)
	if err := c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Rollout: pacing.Encode(done)}); err != nil {
		return true, err
	}
	// Until the cache shows the result, wave decisions see it here.
	c.fleet.mu.Lock()
	c.fleet.reserve(key, done, now)
	c.fleet.mu.Unlock()
	took := now.Sub(rec.At)
	outcome := string(verdict.Result)
	c.metrics.Rollouts.WithLabelValues(outcome).Inc()
	c.metrics.RolloutDuration.WithLabelValues(outcome).Observe(took.Seconds())
	log := c.log.With("workload", key.String(), "after", took.Round(time.Millisecond))
	restarted := rec.At.UTC().Format(time.RFC3339)
	switch verdict.Result {
	case rollout.Succeeded:
		log.Info("rollout complete")
		c.event(w, corev1.EventTypeNormal, "RolloutComplete", "Rollout",
			"Rollout of the restart at %s complete after %s", restarted, took.Round(time.Second))
	case rollout.Unsucceeded:
		log.Warn("rollout failed", "reason", verdict.Reason, "message", verdict.Message)
		c.event(w, corev1.EventTypeWarning, "RolloutFailed", "Rollout",
			"Rollout of the restart at %s failed after %s: %s: %s", restarted, took.Round(time.Second), verdict.Reason, verdict.Message)
	default:
		log.Info("rollout not followed: the workload does not roll its pods by itself", "reason", verdict.Reason)
	}
	c.wake(rec.Sources, now)
	return true, nil
}

// recovered records that the rollout of a restart judged failed has
// completed since (its pods became ready after the deadline, say): the
// record's result becomes complete, which ends the halt of the changes it
// delivered, so the readers those halts held go on in their waves without
// anyone releasing them.
func (c *Controller) recovered(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, rec *pacing.Record, now time.Time) error {
	done := rec.WithResult(rollout.Verdict{Result: rollout.Succeeded, Reason: "Recovered",
		Message: "complete after it was judged failed (" + rec.Reason + ")"}, now)
	if err := c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Rollout: pacing.Encode(done)}); err != nil {
		return err
	}
	c.fleet.mu.Lock()
	c.fleet.reserve(key, done, now)
	c.fleet.mu.Unlock()
	restarted := rec.At.UTC().Format(time.RFC3339)
	c.log.Info("failed rollout recovered: complete after all; the changes it halted go on", "workload", key.String(),
		"failed", rec.Reason)
	c.event(w, corev1.EventTypeNormal, "RolloutRecovered", "Rollout",
		"Rollout of the restart at %s, judged failed (%s), is complete after all; the restarts it held go on", restarted, rec.Reason)
	c.wake(rec.Sources, now)
	return nil
}

// wake enqueues, for each source a rollout that ended had delivered, the
// readers that may move now: those its waves admit, and when the change is
// halted those to hold; and every workload waiting for the cap.
func (c *Controller) wake(sources map[string]string, now time.Time) {
	var keys []catalog.WorkloadKey
	c.fleet.mu.Lock()
	for raw := range sources {
		id, ok := parseSourceID(raw)
		if !ok {
			continue
		}
		src, ok := c.catalog.Source(id)
		if !ok {
			continue
		}
		byName, state := c.waveState(id, src, catalog.WorkloadKey{}, now)
		for _, name := range append(state.Admit, state.Held...) {
			keys = append(keys, byName[name])
		}
	}
	c.fleet.mu.Unlock()
	keys = append(keys, c.fleet.cappedKeys()...)
	for _, key := range keys {
		c.queue.Add(key)
	}
}

func parseSourceID(s string) (catalog.SourceID, bool) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 {
		return catalog.SourceID{}, false
	}
	return catalog.SourceID{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, true
}

// waveState evaluates the waves of the source's current change over its
// readers, and maps member names back to keys (the map is shared: read it
// only). Called with c.fleet.mu held.
//
// self, when set, is the workload deciding, whose restart for the source is
// due. Of the others, those whose pending state the cache cannot tell (a
// large source whose keys they read it does not cover: only an API read
// would) are left out: they take their places when they decide themselves,
// as self, and count once restarted.
//
// The cached source object is evaluated through its memo (wavememo.go); a
// state given the keys one workload reads (a large source) is scanned.
func (c *Controller) waveState(id catalog.SourceID, src *catalog.SourceState, self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, pacing.State) {
	change := src.Change(c.sums)
	released := src.Annotations[c.cfg.Annotations.Release] == change
	if cached, ok := c.catalog.Source(id); ok && cached == src {
		return c.memoizedWaves(id, src, change, released, self, now)
	}
	byName, members := c.waveMembers(id, src, change, c.catalog.WorkloadsReading(id), self, now)
	return byName, c.cfg.Waves.Evaluate(members, released)
}

// waveMembers reads the wave members among keys, readers of the source, for
// its change: those that take part, and their names. Called with
// c.fleet.mu held.
func (c *Controller) waveMembers(id catalog.SourceID, src *catalog.SourceState, change string, keys []catalog.WorkloadKey,
	self catalog.WorkloadKey, now time.Time) (map[string]catalog.WorkloadKey, []pacing.Member) {
	sid := id.String()
	byName := map[string]catalog.WorkloadKey{}
	var members []pacing.Member
	c.fleet.memberReads += len(keys)
	for _, key := range keys {
		r, ok := c.catalog.Workload(key)
		if !ok || !r.OptedIn || r.Problem != "" || c.optedOut(r, id, src) {
			continue
		}
		m := pacing.Member{Key: key.String()}
		byName[m.Key] = key
		rec, reserved := c.fleet.recordOf(key, r, now)
		if rec.Delivered(sid, change) {
			m.Restarted, m.Result = true, rec.Result
			m.Failure = rec.Reason
			if rec.Message != "" {
				m.Failure += ": " + rec.Message
			}
		}
		switch {
		case reserved:
		case key == self:
			m.Pending = true
		default:
			pending, known := pendingFor(c.sums, r, trustedApplied(r), id, src)
			if !known && !m.Restarted {
				delete(byName, m.Key)
				continue
			}
			m.Pending = pending
		}
		if hold, _ := pacing.ParseHold(r.Hold); hold != nil {
			switch {
			case hold.HoldsChange(sid, change):
				m.HeldHere, m.Cause = true, hold.Cause
			case hold.Kind == pacing.HoldWave && hold.Source == sid:
				// A hold for an older change of this source: stale.
			case key == self:
				// The deciding workload's own hold, of another kind or
				// source, never keeps it out of this wave: gatePlan has
				// asked the breaker first, and evaluates the waves of the
				// hold's source itself, so a hold still in force holds it
				// there. Counted as held elsewhere, a released workload
				// would never take a place in a paced wave: every breaker
				// hold over a source of more than unpacedUpTo readers, and
				// every wave hold of a reader of two such sources whose
				// failed rollout recovered, would last for ever.
			default:
				m.HeldElsewhere = true
			}
		}
		members = append(members, m)
	}
	return byName, members
}

// pendingFor reports whether a reader's pods run other data of the source
// than it holds now, such that a restart for it is due (as Decide would find,
// leaving aside grace periods, which waves do not need). known is false when
// the cached state cannot tell: a large source that does not cover the keys
// the reader reads. applied is the reader's applied checksums, nil when they
// cannot be trusted (none, unreadable, or recorded against another pod
// template).
func pendingFor(sums checksum.Hasher, w *catalog.WorkloadState, applied map[string]string, id catalog.SourceID, src *catalog.SourceState) (pending, known bool) {
	if applied == nil {
		return false, true
	}
	old, ok := applied[id.String()]
	if !ok {
		return false, true
	}
	for _, ref := range w.References {
		if ref.ID != id {
			continue
		}
		if !src.Covers(ref.Keys) {
			return false, false
		}
		if src.Matches(sums, old, ref.Keys) || sums.Rebaseline(old) || (old == absent && !ref.Optional) {
			return false, true
		}
		return true, true
	}
	return false, true
}

// withOptOuts returns the workload as decisions should see it (OptOutView).
func (c *Controller) withOptOuts(w *catalog.WorkloadState, sources SourceLookup) (*catalog.WorkloadState, []catalog.SourceID) {
	return OptOutView(c.cfg.Annotations.Ignore, c.sums, w, sources)
}

// optedOut reports whether changes of the source restart the workload not
// (OptedOut).
func (c *Controller) optedOut(w *catalog.WorkloadState, id catalog.SourceID, src *catalog.SourceState) bool {
	return OptedOut(c.cfg.Annotations.Ignore, w, id, src)
}

// OptOutView returns the workload as decisions should see it: for each
// source whose changes it opts out of (OptedOut), the current checksum as
// if its pods had read it. The change is recorded, never restarted for.
// ignoreKey is the sources' ignore annotation; sums computes checksums.
func OptOutView(ignoreKey string, sums checksum.Hasher, w *catalog.WorkloadState, sources SourceLookup) (*catalog.WorkloadState, []catalog.SourceID) {
	if !w.HasApplied {
		return w, nil // first sight records every checksum anyway
	}
	applied := map[string]string{}
	if err := json.Unmarshal([]byte(w.Applied), &applied); err != nil {
		return w, nil
	}
	var ignored []catalog.SourceID
	for _, ref := range w.References {
		src, ok := sources.Source(ref.ID)
		if !ok || !OptedOut(ignoreKey, w, ref.ID, src) {
			continue
		}
		old, known := applied[ref.ID.String()]
		if !known || src.Matches(sums, old, ref.Keys) {
			continue
		}
		applied[ref.ID.String()] = src.Checksum(sums, ref.Keys)
		ignored = append(ignored, ref.ID)
	}
	if len(ignored) == 0 {
		return w, nil
	}
	raw, _ := json.Marshal(applied) // a map of strings always encodes
	view := *w                      // the cached object is shared and never changed
	view.Applied = string(raw)
	return &view, ignored
}

// OptedOut reports whether changes of the source restart the workload not:
// the source's ignore annotation (ignoreKey) is "true", the workload's
// ignore-sources annotation names it, or the opt-in that covers the
// reference needs a source annotation the source does not have.
func OptedOut(ignoreKey string, w *catalog.WorkloadState, id catalog.SourceID, src *catalog.SourceState) bool {
	if src.Annotations[ignoreKey] == "true" || w.Ignores(id) {
		return true
	}
	for _, ref := range w.References {
		if ref.ID == id {
			return ref.SourceAnnotation != "" && !strings.EqualFold(src.Annotations[ref.SourceAnnotation], "true")
		}
	}
	return false
}

// gate is what fleet safety says about a plan.
type gate struct {
	// hold, when set, holds the restart: it is written on the workload.
	hold *pacing.Hold
	// recheck, when positive, is when a held restart is decided again.
	recheck time.Duration
	// queued: the restart waits for its wave or, when capped, for the cap
	// on rollouts in flight, without a hold.
	queued, capped bool
	// unhold: queued, and the workload's wave hold holds nothing any more.
	unhold bool
	// at is when the restart was let through, with the waves' lock held: the
	// time its record and timestamp carry, never before the rollouts it
	// waited for ended.
	at time.Time
}

// gatePlan applies the breaker and the waves to a plan that restarts. It may
// drop sources riding along (still in their grace period) whose waves have
// no place for the workload yet, and adds to the plan the rollout record the
// restart writes, with the removal of any hold. A plan without a restart only
// loses a hold that has nothing left to hold.
func (c *Controller) gatePlan(key catalog.WorkloadKey, w *catalog.WorkloadState, sources SourceLookup, plan *Plan, now time.Time) gate {
	hold, err := pacing.ParseHold(w.Hold)
	if err != nil {
		c.log.Warn("unreadable hold annotation; removing it", "workload", key.String(), "error", err)
	}
	if !plan.Restart {
		if w.Hold != "" && plan.Wait == 0 {
			// Nothing is due or waiting: no restart left to hold.
			plan.setExtra(c.cfg.Annotations.Hold, nil)
		}
		return gate{}
	}
	prev, _ := pacing.ParseRecord(w.Record)
	var restarts []time.Time
	if prev != nil {
		restarts = prev.Restarts
	}
	b := c.cfg.Breaker
	heldByBreaker := hold != nil && hold.Kind == pacing.HoldBreaker
	switch verdict, wait := b.Check(restarts, heldByBreaker, c.fleet.lastChanged(w.References), now); verdict {
	case pacing.Trip:
		return gate{hold: &pacing.Hold{Kind: pacing.HoldBreaker, Since: now,
			Cause: fmt.Sprintf("restarted %d times within %s (budget %d)", pacing.Recent(restarts, b.Window, now), b.Window, b.Budget)},
			recheck: b.Quiet}
	case pacing.Keep:
		return gate{hold: hold, recheck: wait}
	}

	applied := map[string]string{}
	_ = json.Unmarshal([]byte(w.Applied), &applied) // Decide has warned about a bad one
	c.fleet.mu.Lock()
	defer c.fleet.mu.Unlock()
	now = c.now()
	delivered := map[string]string{}
	// rank is the workload's place among those its paced waves let through
	// now: under the cap the first ones go, in the same order.
	paced, rank := false, 0
	self := key.String()
	for _, ref := range w.References {
		sid := ref.ID.String()
		src, ok := sources.Source(ref.ID) // with the keys it reads, if large
		if !ok {
			continue
		}
		// The sources whose new data the restart delivers: those it is for,
		// and those riding along from inside their grace period. Others only
		// have their record rewritten (a newer checksum format, say).
		due := slices.Contains(plan.Changed, ref.ID)
		if !due {
			_, waiting := c.windows.Due(ref.ID, now)
			old, value := applied[sid], plan.Applied[sid]
			if !waiting || value == old || value == absent || value == pending || src.Matches(c.sums, old, ref.Keys) {
				continue
			}
		}
		_, state := c.waveState(ref.ID, src, key, now)
		place := slices.Index(state.Admit, self)
		switch {
		case !state.Paced || place >= 0:
			delivered[sid] = src.Change(c.sums)
			if state.Paced {
				paced, rank = true, max(rank, place)
			}
		case !due:
			// Riding along: it will get its own restart in its own wave.
			if old, known := applied[sid]; known {
				plan.Applied[sid] = old
			} else {
				delete(plan.Applied, sid)
			}
		case state.Halted:
			return gate{hold: &pacing.Hold{Kind: pacing.HoldWave, Source: sid, Change: src.Change(c.sums), Cause: state.Cause, Since: now}}
		default:
			// A wave hold for this change that no longer halts it (the
			// failed rollout recovered) goes: the workload now only waits.
			return gate{queued: true, unhold: hold.HoldsChange(sid, src.Change(c.sums))}
		}
	}
	if paced && c.cfg.MaxInFlight > 0 && c.inFlight(now)+rank >= c.cfg.MaxInFlight {
		return gate{queued: true, capped: true}
	}
	// The new rollout delivers again what the last one delivered and is
	// still current: its outcome speaks for those changes too.
	if prev != nil {
		for sid, change := range prev.Sources {
			if _, ok := delivered[sid]; ok {
				continue
			}
			if id, ok := parseSourceID(sid); ok {
				if src, ok := c.catalog.Source(id); ok && src.Change(c.sums) == change {
					delivered[sid] = change
				}
			}
		}
	}
	rec := pacing.NewRecord(prev, delivered, now, b.Window)
	c.fleet.reserve(key, rec, now)
	plan.setExtra(c.cfg.Annotations.Rollout, pacing.Encode(rec))
	if w.Hold != "" {
		plan.setExtra(c.cfg.Annotations.Hold, nil)
	}
	return gate{at: now}
}

// staleHold reports a wave hold whose change is over: its source changed
// again, is gone, or the change was released.
func (c *Controller) staleHold(raw string) bool {
	hold, err := pacing.ParseHold(raw)
	if err != nil {
		return true
	}
	if hold == nil || hold.Kind != pacing.HoldWave {
		return false
	}
	id, ok := parseSourceID(hold.Source)
	if !ok {
		return true
	}
	src, ok := c.catalog.Source(id)
	return !ok || src.Change(c.sums) != hold.Change || src.Annotations[c.cfg.Annotations.Release] == hold.Change
}

// holdRestart keeps a held restart from happening: it writes the hold on the
// workload unless it is there already, and says so once, in the log and as a
// RestartHeld Event.
func (c *Controller) holdRestart(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, hold *pacing.Hold) error {
	if old, _ := pacing.ParseHold(w.Hold); old != nil && old.Kind == hold.Kind && old.Source == hold.Source &&
		old.Change == hold.Change && old.Cause == hold.Cause {
		c.metrics.SetHeld(c.fleet.setHeld(key, hold.Kind))
		return nil
	}
	if err := c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Hold: pacing.Encode(hold)}); err != nil {
		return err
	}
	// Counted once written: the gauge never counts a hold the workload does
	// not carry.
	c.metrics.SetHeld(c.fleet.setHeld(key, hold.Kind))
	log := c.log.With("workload", key.String())
	switch hold.Kind {
	case pacing.HoldWave:
		id, _ := parseSourceID(hold.Source)
		log.Warn("restart held: a rollout of the same change failed", "source", hold.Source, "change", hold.Change, "failed", hold.Cause)
		c.event(w, corev1.EventTypeWarning, "RestartHeld", "Hold",
			"Restart held: the change %s of %s is halted, a rollout of it failed: %s. It goes on by itself when that rollout "+
				"completes after all, or when %s changes again; to let this change go on now: kubectl annotate %s %s -n %s %s=%s --overwrite",
			hold.Change, hold.Source, hold.Cause, hold.Source, id.Kind, id.Name, id.Namespace, c.cfg.Annotations.Release, hold.Change)
	default:
		log.Warn("restart held by the breaker", "cause", hold.Cause, "quiet", c.cfg.Breaker.Quiet)
		c.event(w, corev1.EventTypeWarning, "RestartHeld", "Hold",
			"Restart held: %s; it restarts once the sources it reads have been still for %s",
			hold.Cause, c.cfg.Breaker.Quiet)
	}
	return nil
}

// patchAnnotations writes annotations (nil removes one) on the workload as
// cached at resourceVersion rv: a conflict means the cache is behind, and
// the workload is decided again on fresh state.
func (c *Controller) patchAnnotations(ctx context.Context, key catalog.WorkloadKey, rv string, annotations map[string]interface{}) error {
	body, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"resourceVersion": rv, "annotations": annotations},
	})
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	start := time.Now()
	_, err = c.client.Resource(key.Resource).Namespace(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "restart-controller"})
	c.metrics.PatchDuration.Observe(time.Since(start).Seconds())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching %s: %w", key, err)
	}
	return nil
}
