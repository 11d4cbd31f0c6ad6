package election

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/restart-controller/restart-controller/internal/kube"
	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// client talks to the one API server the tests of this package share.
var client *kube.Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "election", func(c *testcluster.Cluster) (err error) {
		client, err = kube.New(c.RESTConfig)
		return err
	}))
}

// Short periods: a standby takes over an abandoned lease after 4 s.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 250 * time.Millisecond
)

// candidate is one elector under test and what its callbacks saw.
type candidate struct {
	id      string
	lock    *faultyLock
	elector *Elector
	log     *syncBuffer
	cancel  context.CancelFunc
	done    chan struct{} // Run returned

	mu         sync.Mutex
	startedAt  time.Time // OnStartedLeading
	leaseCtx   context.Context
	stopped    bool
	newLeaders []string
}

// faultyLock fails every call while failing is set: a leader cut off from
// the API server.
type faultyLock struct {
	Lock
	mu      sync.Mutex
	failing bool
	// beforeUpdate, when set, runs once before the next Update.
	beforeUpdate func()
}

var errCutOff = errors.New("cut off from the API server")

func (f *faultyLock) fail(on bool) { f.mu.Lock(); f.failing = on; f.mu.Unlock() }

func (f *faultyLock) check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing {
		return errCutOff
	}
	return nil
}

func (f *faultyLock) Get(ctx context.Context) (Record, error) {
	if err := f.check(); err != nil {
		return Record{}, err
	}
	return f.Lock.Get(ctx)
}

func (f *faultyLock) Create(ctx context.Context, r Record) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Lock.Create(ctx, r)
}

func (f *faultyLock) Update(ctx context.Context, r Record) error {
	if err := f.check(); err != nil {
		return err
	}
	f.mu.Lock()
	hook := f.beforeUpdate
	f.beforeUpdate = nil
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return f.Lock.Update(ctx, r)
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

func newCandidate(t *testing.T, lease, id string, duration time.Duration, release bool) *candidate {
	t.Helper()
	c := &candidate{id: id, log: &syncBuffer{}, done: make(chan struct{})}
	c.lock = &faultyLock{Lock: &LeaseLock{Client: client, Namespace: "default", Name: lease, ID: id}}
	e, err := New(Config{
		Lock: c.lock, LeaseDuration: duration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		ReleaseOnCancel: release,
		Log:             hclog.New(&hclog.LoggerOptions{Output: c.log, Level: hclog.Debug}),
		Callbacks: Callbacks{
			OnStartedLeading: func(ctx context.Context) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.startedAt, c.leaseCtx = time.Now(), ctx
			},
			OnStoppedLeading: func() { c.mu.Lock(); c.stopped = true; c.mu.Unlock() },
			OnNewLeader:      func(id string) { c.mu.Lock(); c.newLeaders = append(c.newLeaders, id); c.mu.Unlock() },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.elector = e
	return c
}

func (c *candidate) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.elector.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-c.done })
}

func (c *candidate) leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseCtx != nil && c.leaseCtx.Err() == nil
}

func (c *candidate) started() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.startedAt }

// stop ends Run and waits for it.
func (c *candidate) stop() { c.cancel(); <-c.done }

func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func holder(t *testing.T, lease string) Record {
	t.Helper()
	l, err := client.GetLease(context.Background(), "default", lease)
	if err != nil {
		t.Fatal(err)
	}
	return recordOf(l.Spec)
}

// Of two candidates one leads, the Lease names it, and the other stands by
// and hears of it.
func TestOneOfTwoLeads(t *testing.T) {
	a := newCandidate(t, "one-of-two", "a", leaseDuration, true)
	b := newCandidate(t, "one-of-two", "b", leaseDuration, true)
	a.start(t)
	b.start(t)
	eventually(t, "one candidate leads", time.Minute, func() bool { return a.leading() || b.leading() })
	leader, standby := a, b
	if b.leading() {
		leader, standby = b, a
	}
	// Several lease durations: the standby never takes over a renewed lease.
	for end := time.Now().Add(3 * leaseDuration); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if standby.leading() {
			t.Fatalf("both %s and %s lead", leader.id, standby.id)
		}
	}
	if got := holder(t, "one-of-two").HolderIdentity; got != leader.id {
		t.Fatalf("the Lease names %q; %q leads", got, leader.id)
	}
	eventually(t, "the standby hears of the leader", 10*time.Second, func() bool {
		standby.mu.Lock()
		defer standby.mu.Unlock()
		return len(standby.newLeaders) > 0 && standby.newLeaders[len(standby.newLeaders)-1] == leader.id
	})
}

// A leader that stops without releasing (a crash) is replaced only once
// the lease duration has passed since the standby last saw the Lease
// change, and the takeover is counted in leaseTransitions.
func TestStoppedLeaderReplacedAfterLeaseDuration(t *testing.T) {
	a := newCandidate(t, "crashed", "a", leaseDuration, false)
	a.start(t)
	eventually(t, "a leads", time.Minute, a.leading)
	before := holder(t, "crashed")
	a.stop()
	if got := holder(t, "crashed").HolderIdentity; got != "a" {
		t.Fatalf("a stopped without releasing, yet the Lease names %q", got)
	}
	b := newCandidate(t, "crashed", "b", leaseDuration, false)
	began := time.Now()
	b.start(t)
	eventually(t, "b takes over", time.Minute, b.leading)
	if waited := b.started().Sub(began); waited < leaseDuration {
		t.Fatalf("b took over %s after it started, before the lease duration of %s", waited, leaseDuration)
	}
	after := holder(t, "crashed")
	if after.HolderIdentity != "b" || after.LeaderTransitions != before.LeaderTransitions+1 {
		t.Fatalf("after the takeover the Lease is %+v; want holder b, transitions %d", after, before.LeaderTransitions+1)
	}
}

// A leader whose context ends releases the lease: a standby with a long
// lease duration takes over at its next try, not after the duration.
func TestReleaseOnCancel(t *testing.T) {
	const long = time.Hour
	a := newCandidate(t, "released", "a", long, true)
	a.start(t)
	eventually(t, "a leads", time.Minute, a.leading)
	b := newCandidate(t, "released", "b", long, true)
	b.start(t)
	eventually(t, "b observes a's lease", time.Minute, func() bool { return b.elector.Leader() == "a" })
	a.stop()
	if r := holder(t, "released"); r.HolderIdentity != "" {
		t.Fatalf("a stopped, yet the Lease still names %q", r.HolderIdentity)
	}
	eventually(t, "b leads after a released", time.Minute, b.leading)
}

// A leader whose renewals fail for the renew deadline stops leading: its
// lease context ends and Run returns.
func TestFailedRenewalsLoseTheLease(t *testing.T) {
	a := newCandidate(t, "cut-off", "a", leaseDuration, true)
	a.start(t)
	eventually(t, "a leads", time.Minute, a.leading)
	a.mu.Lock()
	leaseCtx := a.leaseCtx
	a.mu.Unlock()
	cut := time.Now()
	a.lock.fail(true)
	eventually(t, "a stops leading", time.Minute, func() bool { return leaseCtx.Err() != nil })
	if lost := time.Since(cut); lost < renewDeadline-retryPeriod {
		t.Fatalf("a gave up %s after its renewals began to fail, before the renew deadline of %s", lost, renewDeadline)
	}
	select {
	case <-a.done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after the lease was lost")
	}
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if !stopped {
		t.Fatal("OnStoppedLeading was not called")
	}
}

// A candidate whose update loses the race to another's (a Conflict on the
// resourceVersion it read) has not acquired, and says so without an error.
func TestConflictIsALostRace(t *testing.T) {
	a := newCandidate(t, "race", "a", leaseDuration, true)
	a.start(t)
	eventually(t, "a leads", time.Minute, a.leading)
	a.stop() // released: the next candidate may take it
	b := newCandidate(t, "race", "b", leaseDuration, true)
	other := &LeaseLock{Client: client, Namespace: "default", Name: "race", ID: "c"}
	b.lock.beforeUpdate = func() {
		r, err := other.Get(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		r.HolderIdentity, r.LeaseDurationSeconds, r.RenewTime = "c", 60, time.Now()
		if err := other.Update(context.Background(), r); err != nil {
			t.Error(err)
		}
	}
	if b.elector.tryAcquireOrRenew(context.Background()) {
		t.Fatal("b acquired a lease c wrote after b read it")
	}
	if got := holder(t, "race").HolderIdentity; got != "c" {
		t.Fatalf("the Lease names %q; want c, the race's winner", got)
	}
	if log := b.log.String(); strings.Contains(log, "[ERROR]") || !strings.Contains(log, "another candidate wrote it first") {
		t.Fatalf("a lost race is not logged as one:\n%s", log)
	}
	if _, err := client.GetLease(context.Background(), "default", "race"); apierrors.IsNotFound(err) {
		t.Fatal("the Lease is gone")
	}
}

// A Lease whose renewTime is long past by this machine's clock (the
// holder's clock is behind) is not taken as expired: expiry runs from when
// this candidate saw the record change, by its own monotonic clock.
func TestRemoteRenewTimeIsNotTrusted(t *testing.T) {
	stale := time.Now().Add(-time.Hour)
	writer := &LeaseLock{Client: client, Namespace: "default", Name: "skewed", ID: "x"}
	if err := writer.Create(context.Background(), Record{HolderIdentity: "x", LeaseDurationSeconds: int(leaseDuration / time.Second),
		AcquireTime: stale, RenewTime: stale}); err != nil {
		t.Fatal(err)
	}
	b := newCandidate(t, "skewed", "b", leaseDuration, true)
	began := time.Now()
	b.start(t)
	eventually(t, "b takes over the abandoned lease", time.Minute, b.leading)
	if waited := b.started().Sub(began); waited < leaseDuration {
		t.Fatalf("b took over %s after it started, trusting a renewTime an hour old by its clock", waited)
	}
}
