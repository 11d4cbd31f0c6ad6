// Package election elects one leader among replicas on a coordination/v1
// Lease. It follows client-go's tools/leaderelection (v0.36,
// leaderelection.go) step by step, which the controller cannot link: that
// package and its resourcelock import client-go's whole typed clientset and
// with it every API group (BENCHMARKS.md, "Binary and idle memory").
//
// The algorithm, as client-go's: a candidate tries to acquire the lease
// every RetryPeriod (jittered). A lease counts as held while less than its
// leaseDurationSeconds have passed since this process last saw its record
// change, timed by the local monotonic clock: never by comparing the
// holder's renewTime with the local wall clock, which may be skewed. An
// expired or released lease is taken by a conditional update (its
// resourceVersion), incrementing leaseTransitions; a Conflict means another
// candidate won the race. The leader renews every RetryPeriod and stops
// leading when no renewal succeeded for RenewDeadline. With ReleaseOnCancel
// a leader whose context ends clears the holder, so that a standby takes
// over at once.
package election

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// JitterFactor jitters the retry period, as client-go's does.
const JitterFactor = 1.2

// Callbacks are called as leadership changes.
type Callbacks struct {
	// OnStartedLeading runs in its own goroutine once the lease is
	// acquired; its context ends when leadership is lost or Run's ends.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called when Run returns, leader or not.
	OnStoppedLeading func()
	// OnNewLeader, optional, is called (in its own goroutine) when another
	// holder is observed, this candidate included.
	OnNewLeader func(identity string)
}

// Config configures an Elector; the meaning of each field is client-go's.
type Config struct {
	Lock Lock
	// LeaseDuration is how long standbys wait, from their last observation
	// of a change, before they take a lease over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader tries to renew before it gives up.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between tries.
	RetryPeriod time.Duration
	// ReleaseOnCancel releases the lease when Run's context ends.
	ReleaseOnCancel bool
	Callbacks       Callbacks
	Log             hclog.Logger
}

// Elector runs one candidate's election.
type Elector struct {
	cfg Config

	mu sync.RWMutex
	// observed is the record as last read or written; observedTime when
	// (monotonic clock) it was seen to change.
	observed     Record
	observedTime time.Time
	// reported is the leader last passed to OnNewLeader.
	reported string
}

// New checks cfg as client-go's NewLeaderElector does.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.Lock == nil:
		return nil, errors.New("lock must not be nil")
	case cfg.Lock.Identity() == "":
		return nil, errors.New("the lock's identity is empty")
	case cfg.LeaseDuration <= cfg.RenewDeadline:
		return nil, errors.New("the lease duration must be greater than the renew deadline")
	case cfg.RenewDeadline <= time.Duration(JitterFactor*float64(cfg.RetryPeriod)):
		return nil, errors.New("the renew deadline must be greater than retry period*JitterFactor")
	case cfg.LeaseDuration < 1 || cfg.RenewDeadline < 1 || cfg.RetryPeriod < 1:
		return nil, errors.New("the lease duration, renew deadline and retry period must be positive")
	case cfg.Callbacks.OnStartedLeading == nil || cfg.Callbacks.OnStoppedLeading == nil:
		return nil, errors.New("OnStartedLeading and OnStoppedLeading are required")
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Elector{cfg: cfg}, nil
}

// Run acquires the lease, calls OnStartedLeading and renews the lease until
// ctx ends or a renewal fails for RenewDeadline. It returns without waiting
// for OnStartedLeading.
func (e *Elector) Run(ctx context.Context) {
	defer e.cfg.Callbacks.OnStoppedLeading()
	if !e.acquire(ctx) {
		return // ctx ended
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go e.cfg.Callbacks.OnStartedLeading(ctx)
	e.renew(ctx)
}

// IsLeader reports whether the last observed record names this candidate.
func (e *Elector) IsLeader() bool {
	return e.observedRecord().HolderIdentity == e.cfg.Lock.Identity()
}

// Leader is the holder of the last observed record.
func (e *Elector) Leader() string { return e.observedRecord().HolderIdentity }

func (e *Elector) acquire(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	succeeded := false
	e.cfg.Log.Info("attempting to acquire leader lease", "lock", e.cfg.Lock.Describe())
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		succeeded = e.tryAcquireOrRenew(ctx)
		e.maybeReportTransition()
		if !succeeded {
			e.cfg.Log.Debug("failed to acquire lease", "lock", e.cfg.Lock.Describe())
			return
		}
		e.cfg.Log.Info("successfully acquired lease", "lock", e.cfg.Lock.Describe())
		cancel()
	}, e.cfg.RetryPeriod, JitterFactor, true)
	return succeeded
}

func (e *Elector) renew(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		err := wait.PollUntilContextTimeout(ctx, e.cfg.RetryPeriod, e.cfg.RenewDeadline, true, func(ctx context.Context) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			return e.tryAcquireOrRenew(ctx), nil
		})
		e.maybeReportTransition()
		if err == nil {
			e.cfg.Log.Trace("successfully renewed lease", "lock", e.cfg.Lock.Describe())
			return
		}
		e.cfg.Log.Info("failed to renew lease", "lock", e.cfg.Lock.Describe(), "error", err)
		cancel()
	}, e.cfg.RetryPeriod)
	if e.cfg.ReleaseOnCancel {
		e.release()
	}
}

// release clears the holder (leaseDurationSeconds 1), so that a standby
// takes the lease at its next try.
func (e *Elector) release() bool {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	old, err := e.cfg.Lock.Get(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			e.cfg.Log.Error("error retrieving the lease", "lock", e.cfg.Lock.Describe(), "error", err)
		} else {
			e.cfg.Log.Info("lease not found", "lock", e.cfg.Lock.Describe())
		}
		return false
	}
	if !e.IsLeader() {
		return true
	}
	now := time.Now()
	released := Record{LeaderTransitions: old.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now}
	if err := e.cfg.Lock.Update(ctx, released); err != nil {
		e.cfg.Log.Error("failed to release lease", "lock", e.cfg.Lock.Describe(), "error", err)
		return false
	}
	e.setObserved(released)
	return true
}

// tryAcquireOrRenew is client-go's: a leader whose lease is valid renews
// optimistically from what it last wrote; otherwise the record is read,
// and written unless another holder's lease is still valid.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) bool {
	now := time.Now()
	record := Record{
		HolderIdentity:       e.cfg.Lock.Identity(),
		LeaseDurationSeconds: int(e.cfg.LeaseDuration / time.Second),
		RenewTime:            now,
		AcquireTime:          now,
	}
	if e.IsLeader() && e.isLeaseValid(now) {
		old := e.observedRecord()
		record.AcquireTime, record.LeaderTransitions = old.AcquireTime, old.LeaderTransitions
		err := e.cfg.Lock.Update(ctx, record)
		if err == nil {
			e.setObserved(record)
			return true
		}
		e.cfg.Log.Debug("failed to update lease optimistically, falling back to slow path", "lock", e.cfg.Lock.Describe(), "error", err)
	}
	old, err := e.cfg.Lock.Get(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			e.cfg.Log.Error("error retrieving the lease", "lock", e.cfg.Lock.Describe(), "error", err)
			return false
		}
		if err := e.cfg.Lock.Create(ctx, record); err != nil {
			e.logWriteError("error initially creating the lease", err)
			return false
		}
		e.setObserved(record)
		return true
	}
	if !old.equal(e.observedRecord()) {
		e.setObserved(old)
	}
	if old.HolderIdentity != "" && e.isLeaseValid(now) && !e.IsLeader() {
		e.cfg.Log.Trace("lease is held and has not yet expired", "lock", e.cfg.Lock.Describe(), "holder", old.HolderIdentity)
		return false
	}
	if e.IsLeader() {
		record.AcquireTime, record.LeaderTransitions = old.AcquireTime, old.LeaderTransitions
	} else {
		record.LeaderTransitions = old.LeaderTransitions + 1
	}
	if err := e.cfg.Lock.Update(ctx, record); err != nil {
		e.logWriteError("failed to update the lease", err)
		return false
	}
	e.setObserved(record)
	return true
}

// logWriteError logs a failed write; a Conflict or AlreadyExists is a race
// another candidate won, not an error.
func (e *Elector) logWriteError(msg string, err error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		e.cfg.Log.Debug(msg+": another candidate wrote it first", "lock", e.cfg.Lock.Describe(), "error", err)
		return
	}
	e.cfg.Log.Error(msg, "lock", e.cfg.Lock.Describe(), "error", err)
}

func (e *Elector) maybeReportTransition() {
	holder := e.observedRecord().HolderIdentity
	e.mu.Lock()
	changed := holder != e.reported
	e.reported = holder
	e.mu.Unlock()
	if changed && e.cfg.Callbacks.OnNewLeader != nil {
		go e.cfg.Callbacks.OnNewLeader(holder)
	}
}

// isLeaseValid: less than the observed record's lease duration has passed
// since it was observed to change, by the monotonic clock.
func (e *Elector) isLeaseValid(now time.Time) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.observedTime.Add(time.Second * time.Duration(e.observed.LeaseDurationSeconds)).After(now)
}

func (e *Elector) setObserved(r Record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observed, e.observedTime = r, time.Now()
}

func (e *Elector) observedRecord() Record {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.observed
}
