package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/restart-controller/restart-controller/internal/config"
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
func runAsLeader(ctx context.Context, s config.Settings, client coordinationv1client.CoordinationV1Interface, log hclog.Logger, m *metrics.Metrics,
	work func(runCtx, writeCtx context.Context)) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: s.LeaseNamespace, Name: s.LeaseName},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.LeaderIdentity},
	}
	// The election runs on a context that SIGTERM does not cancel: it is
	// cancelled only after work has drained, which then releases the lease.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var (
		lost     bool
		leading  atomic.Bool
		workDone = make(chan struct{})
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   s.LeaseDuration,
		RenewDeadline:   s.LeaseRenewDeadline,
		RetryPeriod:     s.LeaseRetryPeriod,
		ReleaseOnCancel: true,
		Name:            s.LeaseName,
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
