package restart

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/keyread"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
	"github.com/restart-controller/restart-controller/internal/strategy"
)

// load reads everything the decision of the workload reads, into a
// snapshot of plain values: the cached workload (in a dry run, as its
// simulated writes left it) with its records read, the sources it reads
// (for a large one, the keys it reads from the API server; a source absent
// from the cache confirmed absent with the API server), those its last
// restart and its hold name, the open grace periods of their changes,
// where its last restart's rollout stands (a runNow restart's Job read
// from the API server), and whether the cache shows this process's last
// write to it yet. A workload that is gone loads as a zero Workload.
func (c *Controller) load(ctx context.Context, key catalog.WorkloadKey) (decision.Snapshot, error) {
	now := c.Clock()
	dryRun := c.Config.Settings.DryRun
	snap := decision.Snapshot{Key: key, Now: now, Pace: !dryRun}
	cached, ok := c.Catalog.Workload(key)
	if !ok || !cached.OptedIn || cached.Problem != "" {
		// Nothing of it is decided: the opt-in and references gates stop it.
		snap.Workload.State = cached
		return snap, nil
	}
	if dryRun {
		cached = c.dryRun.overlay(key, cached)
	}
	w := decision.ReadWorkload(cached)
	snap.Workload = w
	sources, err := c.sourcesOf(ctx, w)
	if err != nil {
		return snap, err
	}
	snap.Sources = sources
	snap.Grace = c.grace.Of(cached.References, now)
	snap.Namespace = c.Catalog.NamespaceLabels(key.Namespace)
	if dryRun {
		return snap, nil // a dry run neither paces nor follows rollouts
	}
	snap.OwnWrite = c.Pacing.OwnWrite(key, w.LastRestart, now)
	snap.Rollout = c.rolloutOf(ctx, key, w)
	return snap, nil
}

// sourcesOf reads the sources the decision of w looks at: those it reads,
// and those its last restart delivered and its hold names. The catalog's
// states are shared and never changed; each large source w reads keys of
// is given the digests of those keys first, read from the API server. A
// source the cache does not hold, about to be recorded absent, is
// confirmed absent first: the cache of sources may lag behind that of
// workloads.
func (c *Controller) sourcesOf(ctx context.Context, w decision.Workload) (decision.Sources, error) {
	sources := decision.Sources{}
	for _, ref := range w.State.References {
		state, ok := c.Catalog.Source(ref.ID)
		if !ok {
			if err := c.confirmAbsent(ctx, w, ref); err != nil {
				return nil, err
			}
			continue
		}
		if !state.Covers(ref.Keys) {
			filled, err := c.Keys.Read(ctx, ref.ID, state, ref.Keys)
			if errors.Is(err, keyread.ErrStale) {
				return nil, fmt.Errorf("reading keys of %s: %w: %w", ref.ID, errCacheBehind, err)
			}
			if err != nil {
				return nil, fmt.Errorf("reading keys %s of %s: %w", strings.Join(ref.Keys, ", "), ref.ID, err)
			}
			state = filled
		}
		sources[ref.ID] = state
	}
	w.AddNamedSources(sources, c.Catalog.Source)
	return sources, nil
}

// confirmAbsent asks the API server whether a source the workload reads
// that the cache does not hold exists, unless nothing would be recorded
// for it: its kind's absences say nothing (a sourceSelector, lifecycle
// updatesOnly), or it is recorded absent already (and no regex list
// matched it: such an entry leaves the record).
func (c *Controller) confirmAbsent(ctx context.Context, w decision.Workload, ref catalog.Reference) error {
	id := ref.ID
	if c.Config.SourceLifecycle.Unknown(id.Kind) {
		return nil
	}
	if old, known := w.Applied[id.String()]; known && old == record.Absent && !ref.Matched {
		return nil
	}
	found, err := c.Exists(ctx, id)
	if err != nil {
		return fmt.Errorf("confirming that %s does not exist: %w", id, err)
	}
	if found {
		return fmt.Errorf("%s exists: %w", id, errCacheBehind)
	}
	return nil
}

// rolloutOf reads where the rollout of the workload's last restart stands
// beyond its cached status: the Job a runNow restart started (Jobs are not
// watched, so it is read while it may still end), and whether this
// process follows it.
func (c *Controller) rolloutOf(ctx context.Context, key catalog.WorkloadKey, w decision.Workload) decision.Rollout {
	var r decision.Rollout
	rec := w.LastRestart
	if rec == nil {
		return r
	}
	r.FollowedAt, r.Ended, r.Followed = c.followed.state(key)
	running := rec.InFlight() || rec.Result == rollout.ResultFailed && rec.Reason == rollout.ReasonDeadlineExceeded
	if rec.Job != "" && running {
		status, poll := strategy.JobStatus(ctx, c.Client, key.Namespace, rec.Job)
		r.Job, r.JobPoll = &status, poll
	}
	return r
}
