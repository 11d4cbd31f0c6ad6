package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/election"
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
