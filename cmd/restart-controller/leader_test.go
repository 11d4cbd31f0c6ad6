package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/election"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

// stubLock answers every write with err.
type stubLock struct {
	election.Lock
	err error
}

func (s *stubLock) Create(context.Context, election.Record) error { return s.err }
func (s *stubLock) Update(context.Context, election.Record) error { return s.err }

// The lease counts as this replica's only within the renew deadline of a
// successful write of it; failed writes do not renew it.
func TestRenewClock(t *testing.T) {
	stub := &stubLock{}
	l := &renewClock{Lock: stub}
	if l.renewedWithin(time.Hour) {
		t.Fatal("fresh before any write of the lease")
	}
	if err := l.Create(context.Background(), election.Record{}); err != nil {
		t.Fatal(err)
	}
	if !l.renewedWithin(time.Hour) {
		t.Fatal("not fresh right after acquiring")
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.renewedWithin(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still fresh long past the renew deadline")
		}
		time.Sleep(time.Millisecond)
	}
	stub.err = errors.New("conflict")
	if err := l.Update(context.Background(), election.Record{}); err == nil {
		t.Fatal("the lock's error was lost")
	}
	if l.renewedWithin(20 * time.Millisecond) {
		t.Fatal("a failed renewal renewed")
	}
	stub.err = nil
	if err := l.Update(context.Background(), election.Record{}); err != nil || !l.renewedWithin(time.Hour) {
		t.Fatalf("a renewal did not renew: %v", err)
	}
}

// leases is an API server of one Lease that stops answering when cut.
type leases struct {
	mu    sync.Mutex
	lease *coordinationv1.Lease
	rv    int
	cut   bool
}

func (l *leases) answer() error {
	if l.cut {
		return errors.New("connection refused")
	}
	return nil
}

func (l *leases) GetLease(_ context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.answer(); err != nil {
		return nil, err
	}
	if l.lease == nil {
		return nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), name)
	}
	return l.lease.DeepCopy(), nil
}

func (l *leases) CreateLease(_ context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.write(lease, true)
}

func (l *leases) UpdateLease(_ context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.write(lease, false)
}

func (l *leases) write(lease *coordinationv1.Lease, create bool) (*coordinationv1.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.answer(); err != nil {
		return nil, err
	}
	if create != (l.lease == nil) || (!create && lease.ResourceVersion != l.lease.ResourceVersion) {
		return nil, apierrors.NewConflict(coordinationv1.Resource("leases"), lease.Name, errors.New("changed"))
	}
	l.rv++
	l.lease = lease.DeepCopy()
	l.lease.ResourceVersion = strconv.Itoa(l.rv)
	return l.lease.DeepCopy(), nil
}

// A leader cut off from the API server stops writing: its fence refuses
// once the renew deadline has passed since its last renewal began, its
// write context ends, and runAsLeader reports the lost lease.
func TestLeaderCutOffStopsWriting(t *testing.T) {
	s := config.Settings{LeaseNamespace: "ns", LeaseName: "lease", LeaderIdentity: "me",
		LeaseDuration: 3 * time.Second, LeaseRenewDeadline: 2 * time.Second, LeaseRetryPeriod: 200 * time.Millisecond}
	api := &leases{}
	s.LeaderElect = true
	lock := newLeaseLock(s, api)
	type observed struct {
		writeCtx context.Context
		fresh    func() bool
	}
	started := make(chan observed, 1)
	result := make(chan error, 1)
	go func() {
		result <- runAsLeader(context.Background(), s, lock, hclog.NewNullLogger(), metrics.New(func() (int, int) { return 0, 0 }),
			func(_, writeCtx context.Context) {
				started <- observed{writeCtx, lock.fresh}
				<-writeCtx.Done()
			})
	}()
	var o observed
	select {
	case o = <-started:
	case <-time.After(time.Minute):
		t.Fatal("never led")
	}
	if !o.fresh() {
		t.Fatal("the fence refuses writes of a leader that just renewed")
	}
	api.mu.Lock()
	api.cut = true
	api.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for o.fresh() {
		if time.Now().After(deadline) {
			t.Fatal("the fence still allows writes a minute after the API server stopped answering")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-result:
		if !errors.Is(err, errLostLease) {
			t.Fatalf("runAsLeader returned %v; want errLostLease", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("runAsLeader did not return after losing the lease")
	}
	if o.writeCtx.Err() == nil {
		t.Fatal("the write context is still open after the lease was lost")
	}
}
