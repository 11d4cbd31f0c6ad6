package restart

import (
	"context"
	"errors"
	"testing"
)

// A replica that may have lost its lease writes nothing: the restart that
// is due is refused before it reaches the API server, and retried once the
// lease is fresh again (or by the next leader).
func TestNoWriteWithoutAFreshLease(t *testing.T) {
	f := newFleetHarness(t, 1)
	fresh := false
	f.c.Fresh = func() bool { return fresh }
	if err := f.c.Reconcile(context.Background(), f.keys[0]); !errors.Is(err, errLeaseStale) {
		t.Fatalf("reconcile with a stale lease: %v, want errLeaseStale", err)
	}
	if n := len(f.patches()); n != 0 {
		t.Fatalf("%d patches sent with a stale lease", n)
	}
	fresh = true
	if got := f.reconcileAll(); len(got) != 1 {
		t.Fatalf("restarted %v once the lease is fresh, want w00", got)
	}
}
