package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

// stubLock answers every write with err; Identity is "me".
type stubLock struct {
	resourcelock.Interface
	err error
}

func (s *stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return s.err }
func (s *stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return s.err }
func (s *stubLock) Identity() string                                                { return "me" }

// The lease counts as this replica's only within the renew deadline of a
// successful write of it naming this replica; failed writes do not renew
// it, and the release (a write naming no holder) ends it at once.
func TestRenewClock(t *testing.T) {
	stub := &stubLock{}
	l := &renewClock{Interface: stub}
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
	if l.renewedWithin(time.Hour) {
		t.Fatal("fresh before any write of the lease")
	}
	if err := l.Create(context.Background(), mine); err != nil {
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
	if err := l.Update(context.Background(), mine); err == nil {
		t.Fatal("the lock's error was lost")
	}
	if l.renewedWithin(20 * time.Millisecond) {
		t.Fatal("a failed renewal renewed")
	}
	stub.err = nil
	if err := l.Update(context.Background(), mine); err != nil || !l.renewedWithin(time.Hour) {
		t.Fatalf("a renewal did not renew: %v", err)
	}
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil || l.renewedWithin(time.Hour) {
		t.Fatalf("still fresh after releasing the lease: %v", err)
	}
}

// leaseSettings are short lease timings: a lost lease is noticed within
// two seconds.
func leaseSettings(lease, identity string) config.Settings {
	return config.Settings{LeaseNamespace: "default", LeaseName: lease, LeaderIdentity: identity,
		LeaseDuration: 3 * time.Second, LeaseRenewDeadline: 2 * time.Second, LeaseRetryPeriod: 200 * time.Millisecond}
}

// cuttable is a clientset on the shared API server whose requests fail,
// as from a replica cut off from it, while cut is set.
func cuttable(t *testing.T) (kubernetes.Interface, *atomic.Bool) {
	t.Helper()
	cut := &atomic.Bool{}
	rc := rest.CopyConfig(apiServer(t).RESTConfig)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if cut.Load() {
				return nil, errors.New("cut off from the API server")
			}
			return rt.RoundTrip(r)
		})
	})
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return client, cut
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// leader is one runAsLeader under test and what its work saw.
type leader struct {
	metrics *metrics.Metrics
	log     *syncBuffer
	started chan leading
	result  chan error
}

// leading is what work is called with.
type leading struct {
	runCtx, writeCtx context.Context
	fresh            func() bool
}

// startLeader runs runAsLeader until ctx ends; work reports its call on
// started, then runs drain once runCtx ends.
func startLeader(ctx context.Context, s config.Settings, client kubernetes.Interface, drain func()) *leader {
	l := &leader{metrics: metrics.New(func() (int, int) { return 0, 0 }), log: &syncBuffer{},
		started: make(chan leading, 1), result: make(chan error, 1)}
	log := hclog.New(&hclog.LoggerOptions{Output: l.log, Level: hclog.Debug})
	s.LeaderElect = true
	lease := newLeaseLock(s, client.CoordinationV1())
	go func() {
		l.result <- runAsLeader(ctx, s, lease, log, l.metrics, func(runCtx, writeCtx context.Context) {
			l.started <- leading{runCtx, writeCtx, lease.fresh}
			<-runCtx.Done()
			drain()
		})
	}()
	return l
}

func (l *leader) waitLeading(t *testing.T) leading {
	t.Helper()
	select {
	case w := <-l.started:
		return w
	case <-time.After(time.Minute):
		t.Fatalf("never led:\n%s", l.log)
		return leading{}
	}
}

func (l *leader) waitResult(t *testing.T) error {
	t.Helper()
	select {
	case err := <-l.result:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("runAsLeader did not return:\n%s", l.log)
		return nil
	}
}

func holderOf(client kubernetes.Interface, lease string) (string, error) {
	l, err := client.CoordinationV1().Leases("default").Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", err
	}
	return *l.Spec.HolderIdentity, nil
}

// A leader cut off from the API server stops writing: its fence refuses
// once the renew deadline has passed since its last renewal began, its
// write context ends, and runAsLeader reports the lost lease.
func TestLeaderCutOffStopsWriting(t *testing.T) {
	client, cut := cuttable(t)
	l := startLeader(context.Background(), leaseSettings("cut-off", "me"), client, func() {})
	w := l.waitLeading(t)
	if !w.fresh() {
		t.Fatal("the fence refuses writes of a leader that just renewed")
	}
	if v := testutil.ToFloat64(l.metrics.Leader); v != 1 {
		t.Fatalf("restart_controller_leader is %v while leading", v)
	}
	cut.Store(true)
	deadline := time.Now().Add(time.Minute)
	for w.fresh() {
		if time.Now().After(deadline) {
			t.Fatal("the fence still allows writes a minute after the API server stopped answering")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.waitResult(t); !errors.Is(err, errLostLease) {
		t.Fatalf("runAsLeader returned %v; want errLostLease", err)
	}
	if w.writeCtx.Err() == nil {
		t.Fatal("the write context is still open after the lease was lost")
	}
	if v := testutil.ToFloat64(l.metrics.Leader); v != 0 {
		t.Fatalf("restart_controller_leader is %v after the lease was lost", v)
	}
}

// On SIGTERM the leader drains before it releases the lease: while work
// drains, its write context is open and the Lease names it; once
// runAsLeader returns, the Lease names no one, and the standby, which
// logged that it stands by, takes over at its next try rather than after
// the lease duration.
func TestDrainBeforeRelease(t *testing.T) {
	client, _ := cuttable(t)
	s := leaseSettings("drain", "first")
	s.LeaseDuration = time.Hour // a standby taking over sooner saw the release
	ctx, sigterm := context.WithCancel(context.Background())
	var drained struct {
		sync.Mutex
		holder            string
		readErr, writeErr error
	}
	var first *leader
	var w leading
	first = startLeader(ctx, s, client, func() {
		drained.Lock()
		defer drained.Unlock()
		time.Sleep(500 * time.Millisecond) // a reconcile finishing
		drained.holder, drained.readErr = holderOf(client, "drain")
		drained.writeErr = w.writeCtx.Err()
	})
	w = first.waitLeading(t)

	standbyCtx, stopStandby := context.WithCancel(context.Background())
	defer stopStandby()
	standby := startLeader(standbyCtx, leaseSettings("drain", "second"), client, func() {})
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(standby.log.String(), "standing by; another replica leads: leader=first") {
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not log that it stands by:\n%s", standby.log)
		}
		time.Sleep(20 * time.Millisecond)
	}

	sigterm()
	if err := first.waitResult(t); err != nil {
		t.Fatalf("runAsLeader returned %v after SIGTERM; want nil", err)
	}
	drained.Lock()
	if drained.holder != "first" || drained.readErr != nil || drained.writeErr != nil {
		t.Errorf("while draining, the Lease named %q (%v) and the write context was %v; want first, open",
			drained.holder, drained.readErr, drained.writeErr)
	}
	drained.Unlock()
	standby.waitLeading(t)
	if got, err := holderOf(client, "drain"); got != "second" || err != nil {
		t.Fatalf("after the release the Lease names %q (%v); want second", got, err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
