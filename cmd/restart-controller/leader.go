package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/logging"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

// errLostLease ends the process: a replica that lost the lease may hold a
// stale view, and a fresh start is the simplest way back to a warm standby.
var errLostLease = errors.New("lost the leader lease")

// runAsLeader waits for the lease, then calls work until ctx ends or the
// lease is lost. The election is client-go's (tools/leaderelection, on a
// coordination/v1 Lease through resourcelock.LeaseLock). The caches are
// already warm when this starts, so a standby takes over in about one lease
// period.
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
func runAsLeader(ctx context.Context, s config.Settings, lock *renewClock, log hclog.Logger, m *metrics.Metrics,
	work func(runCtx, writeCtx context.Context)) error {
	// The election runs on a context that SIGTERM does not cancel: it is
	// cancelled only after work has drained, which then releases the lease.
	// client-go's elector logs through the klog logger the context carries.
	electionCtx, stopElection := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logging.Logr(log)))
	defer stopElection()
	var (
		lost     bool
		leading  atomic.Bool
		workDone = make(chan struct{})
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            s.LeaseName,
		LeaseDuration:   s.LeaseDuration,
		RenewDeadline:   s.LeaseRenewDeadline,
		RetryPeriod:     s.LeaseRetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
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

// newLeaseLock returns the leader election's lock, which is the write fence
// over it too (fresh); nil without leader election.
func newLeaseLock(s config.Settings, leases coordinationv1client.LeasesGetter) *renewClock {
	if !s.LeaderElect {
		return nil
	}
	return &renewClock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: s.LeaseNamespace, Name: s.LeaseName},
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.LeaderIdentity},
	}, renewDeadline: s.LeaseRenewDeadline}
}

// renewClock is client-go's resource lock, remembering when its last
// successful acquisition or renewal began. The lease runs from the holder's
// write as others observe it, which is no earlier than when the write
// began, so a write that began within the renew deadline (shorter than the
// lease) leaves this replica the holder for certain. Time here is the
// monotonic clock, which keeps running while the process is stopped. A
// write that names no holder or another (the release) renews nothing.
type renewClock struct {
	resourcelock.Interface
	renewDeadline time.Duration
	mu            sync.Mutex
	renewed       time.Time
}

// fresh reports whether the lease is certainly this replica's: renewed
// within the renew deadline. Without leader election (nil) every write may go.
func (l *renewClock) fresh() bool {
	return l == nil || l.renewedWithin(l.renewDeadline)
}

func (l *renewClock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	began := time.Now()
	err := l.Interface.Create(ctx, r)
	l.note(began, r, err)
	return err
}

func (l *renewClock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	began := time.Now()
	err := l.Interface.Update(ctx, r)
	l.note(began, r, err)
	return err
}

func (l *renewClock) note(began time.Time, r resourcelock.LeaderElectionRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
	case r.HolderIdentity == l.Identity():
		l.renewed = began
	default:
		l.renewed = time.Time{}
	}
}

func (l *renewClock) renewedWithin(d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.renewed.IsZero() && time.Since(l.renewed) < d
}
