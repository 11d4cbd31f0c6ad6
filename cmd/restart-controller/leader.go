package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/election"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

// errLostLease ends the process: a replica that lost the lease may hold a
// stale view, and a fresh start is the simplest way back to a warm standby.
var errLostLease = errors.New("lost the leader lease")

// runAsLeader waits for the lease, then calls work until ctx ends or the
// lease is lost. The caches are already warm when this starts, so a standby
// takes over in about one lease period.
//
// On SIGTERM (ctx ends) work drains first and the lease is released after
// it, so the next leader never writes while this one still does. On a lost
// lease, writeCtx is cancelled at once and every write stops.
//
// The lock's fresh reports whether the lease is certainly still this
// replica's: its last renewal began less than the renew deadline ago. A
// replica frozen past its lease (SIGSTOP, a paused VM) wakes with writeCtx
// still open until its elector notices, one API call later; its workers
// ask fresh before every write and stop at once.
func runAsLeader(ctx context.Context, s config.Settings, lock *leaseLock, log hclog.Logger, m *metrics.Metrics,
	work func(runCtx, writeCtx context.Context)) error {
	// The election runs on a context that SIGTERM does not cancel: it is
	// cancelled only after work has drained, which then releases the lease.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var (
		lost     bool
		leading  atomic.Bool
		workDone = make(chan struct{})
	)
	elector, err := election.New(election.Config{
		Lock:            lock.renewClock,
		LeaseDuration:   s.LeaseDuration,
		RenewDeadline:   s.LeaseRenewDeadline,
		RetryPeriod:     s.LeaseRetryPeriod,
		ReleaseOnCancel: true,
		Log:             log,
		Callbacks: election.Callbacks{
			OnStartedLeading: func(leaseCtx context.Context) {
				defer close(workDone)
				leading.Store(true)
				log.Info("acquired lease; starting work", "identity", s.LeaderIdentity)
				m.Leader.Set(1)
				runCtx, stopRun := context.WithCancel(ctx)
				go func() {
					<-leaseCtx.Done()
					stopRun()
				}()
				work(runCtx, leaseCtx)
				stopRun()
				if ctx.Err() != nil {
					stopElection()
				}
			},
			OnStoppedLeading: func() {
				m.Leader.Set(0)
				if ctx.Err() == nil {
					lost = true
				}
			},
			OnNewLeader: func(identity string) {
				if identity != s.LeaderIdentity {
					log.Info("standing by; another replica leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	go func() {
		<-ctx.Done()
		// Not leading: nothing to drain, so leave the election at once.
		if !leading.Load() {
			stopElection()
		}
	}()
	elector.Run(electionCtx)
	if leading.Load() {
		// The elector returns without waiting for its callback; the writes
		// must have stopped before this process may exit.
		<-workDone
	}
	if lost {
		return errLostLease
	}
	log.Info("released lease")
	return nil
}

// leaseLock is the leader election's lock and the write fence over it:
// fresh reports whether the lease is certainly this replica's. Without
// leader election every write may go.
type leaseLock struct {
	renewClock *renewClock
	fresh      func() bool
}

func newLeaseLock(s config.Settings, client election.LeaseClient) *leaseLock {
	if !s.LeaderElect {
		return &leaseLock{fresh: func() bool { return true }}
	}
	lock := &renewClock{Lock: &election.LeaseLock{Client: client, Namespace: s.LeaseNamespace, Name: s.LeaseName, ID: s.LeaderIdentity}}
	return &leaseLock{renewClock: lock, fresh: func() bool { return lock.renewedWithin(s.LeaseRenewDeadline) }}
}

// renewClock is a resource lock that remembers when its last successful
// acquisition or renewal began. The lease runs from the holder's write as
// others observe it, which is no earlier than when the write began, so a
// write that began within the renew deadline (shorter than the lease)
// leaves this replica the holder for certain. Time here is the monotonic
// clock, which keeps running while the process is stopped.
type renewClock struct {
	election.Lock
	mu      sync.Mutex
	renewed time.Time
}

func (l *renewClock) Create(ctx context.Context, r election.Record) error {
	began := time.Now()
	err := l.Lock.Create(ctx, r)
	l.note(began, err)
	return err
}

func (l *renewClock) Update(ctx context.Context, r election.Record) error {
	began := time.Now()
	err := l.Lock.Update(ctx, r)
	l.note(began, err)
	return err
}

func (l *renewClock) note(began time.Time, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewed = began
}

func (l *renewClock) renewedWithin(d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.renewed.IsZero() && time.Since(l.renewed) < d
}
