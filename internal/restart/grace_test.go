package restart

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

func TestGracePeriodsObserve(t *testing.T) {
	const grace = 10 * time.Second
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		name       string
		at         time.Duration // after t0
		wantDue    time.Duration // after t0
		wantMerged bool
	}{
		{"first change opens a window", 0, 10 * time.Second, false},
		{"change inside the window merges, does not extend", 4 * time.Second, 10 * time.Second, true},
		{"change just before the end merges", 10*time.Second - time.Nanosecond, 10 * time.Second, true},
		{"change at the end opens a new window", 10 * time.Second, 20 * time.Second, false},
		{"change inside the new window merges", 15 * time.Second, 20 * time.Second, true},
		{"change long after opens a new window", time.Hour, time.Hour + 10*time.Second, false},
	}
	w := newGracePeriods(grace)
	for _, s := range steps {
		due, merged := w.Observe(cmApp, t0.Add(s.at), false, nil)
		if !due.Equal(t0.Add(s.wantDue)) || merged != s.wantMerged {
			t.Errorf("%s: Observe = %v, %v; want %v, %v", s.name, due.Sub(t0), merged, s.wantDue, s.wantMerged)
		}
	}
	// Other sources have their own windows.
	if due, merged := w.Observe(secDB, t0.Add(time.Hour+5*time.Second), false, nil); merged || !due.Equal(t0.Add(time.Hour+15*time.Second)) {
		t.Errorf("second source: %v, %v", due.Sub(t0), merged)
	}
	if opened, ok := w.Opened(cmApp); !ok || !opened.Equal(t0.Add(time.Hour)) {
		t.Errorf("Opened = %v, %v; want the latest window's start", opened, ok)
	}
	if _, ok := w.Opened(cmGone); ok {
		t.Error("Opened reports a source that never changed")
	}
}

func TestGracePeriodsDue(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	w := newGracePeriods(10 * time.Second)
	w.Observe(cmApp, t0, false, nil)
	cases := []struct {
		name    string
		id      catalog.SourceID
		at      time.Duration
		wantDue time.Duration
		wantOK  bool
	}{
		{"at the start", cmApp, 0, 10 * time.Second, true},
		{"inside", cmApp, 9 * time.Second, 10 * time.Second, true},
		{"at the end", cmApp, 10 * time.Second, 0, false},
		{"after the end", cmApp, time.Minute, 0, false},
		{"source without window", secDB, 0, 0, false},
	}
	for _, tc := range cases {
		g, ok := w.Of([]catalog.Reference{{ID: tc.id}}, t0.Add(tc.at))[tc.id]
		if ok != tc.wantOK || (ok && (!g.Ends.Equal(t0.Add(tc.wantDue)) || !g.Updating)) {
			t.Errorf("%s: Of = %+v, %v; want +%v, %v", tc.name, g, ok, tc.wantDue, tc.wantOK)
		}
	}

	// No grace period: nothing ever waits.
	zero := newGracePeriods(0)
	zero.Observe(cmApp, t0, false, nil)
	if _, ok := zero.Of([]catalog.Reference{{ID: cmApp}}, t0)[cmApp]; ok {
		t.Error("a zero grace period left a window open")
	}
	if _, merged := zero.Observe(cmApp, t0, false, nil); merged {
		t.Error("a zero grace period merged a change")
	}
}

func TestGracePeriodsSweep(t *testing.T) {
	const grace = 10 * time.Second
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	w := newGracePeriods(grace)
	open1 := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "open1"}
	open2 := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "open2"}
	ended := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "ended"}
	old := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "old"}

	now := t0.Add(2 * time.Minute)
	w.Observe(open1, now.Add(-time.Second), false, nil)
	w.Observe(open2, now, false, nil)
	w.Observe(ended, now.Add(-grace), false, nil)                 // ended exactly now
	w.Observe(old, now.Add(-(2*grace + time.Minute)), false, nil) // ended one grace period and a minute ago

	if got := w.Sweep(now); got != 2 {
		t.Errorf("Sweep = %d open, want 2", got)
	}
	// Ended windows are kept a while for latency metrics; old ones are forgotten.
	if _, ok := w.Opened(ended); !ok {
		t.Error("a window that just ended was forgotten")
	}
	if _, ok := w.Opened(old); ok {
		t.Error("an old window was kept")
	}
	// Once forgotten, a change opens a fresh window.
	if _, merged := w.Observe(old, now, false, nil); merged {
		t.Error("change merged into a forgotten window")
	}
	if got := w.Sweep(now.Add(grace)); got != 0 {
		t.Errorf("Sweep after every window ended = %d, want 0", got)
	}
	if got := w.Sweep(now.Add(time.Hour)); got != 0 {
		t.Errorf("Sweep much later = %d, want 0", got)
	}
	for _, id := range []catalog.SourceID{open1, open2, ended, old} {
		if _, ok := w.Opened(id); ok {
			t.Errorf("%s kept after a long time", id)
		}
	}
}

func TestGracePeriodsConcurrent(t *testing.T) {
	w := newGracePeriods(time.Second)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				now := t0.Add(time.Duration(j) * 10 * time.Millisecond)
				w.Observe(cmApp, now, false, nil)
				w.Of([]catalog.Reference{{ID: cmApp}}, now)
				w.Opened(cmApp)
				w.Sweep(now)
			}
		}(i)
	}
	wg.Wait()
	// The last change any goroutine observed opened no later window than
	// the latest time observed, and it is still open then.
	last := t0.Add(199 * 10 * time.Millisecond)
	if opened, ok := w.Opened(cmApp); !ok || opened.After(last) || opened.Before(t0) {
		t.Fatalf("window opened at %v (%v), want within [%v, %v]", opened, ok, t0, last)
	}
	if _, open := w.Of([]catalog.Reference{{ID: cmApp}}, last)[cmApp]; !open {
		t.Fatal("no window open at the last change")
	}
}

// Only windows holding an update of existing data report Updating: a window
// opened by a creation has no older data that pods could have read.
func TestGracePeriodsUpdating(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newGracePeriods(10 * time.Second)
	updating := func(at time.Time) bool {
		return w.Of([]catalog.Reference{{ID: cmApp}}, at)[cmApp].Updating
	}
	w.Observe(cmApp, t0, true, nil)
	if updating(t0.Add(time.Second)) {
		t.Fatal("a creation alone counts as an update")
	}
	w.Observe(cmApp, t0.Add(2*time.Second), false, nil)
	if !updating(t0.Add(3 * time.Second)) {
		t.Fatal("an update merged into a creation's window is not reported")
	}
	if updating(t0.Add(10 * time.Second)) {
		t.Fatal("an ended window still reports an update")
	}
	w.Observe(cmApp, t0.Add(11*time.Second), true, nil)
	if updating(t0.Add(12 * time.Second)) {
		t.Fatal("a new window opened by a creation inherits the old window's update")
	}
}

// The keys a window's changes touched are merged for the Restarted Event;
// an update of unknown keys makes them unknown; a creation adds none.
func TestGracePeriodsChangedKeys(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newGracePeriods(10 * time.Second)
	if _, known := w.ChangedKeys(cmApp); known {
		t.Fatal("keys known without a window")
	}
	w.Observe(cmApp, t0, false, []string{"b"})
	w.Observe(cmApp, t0.Add(time.Second), false, []string{"a", "b"})
	if keys, known := w.ChangedKeys(cmApp); !known || strings.Join(keys, ",") != "a,b" {
		t.Fatalf("keys %v %v, want a,b", keys, known)
	}
	w.Observe(cmApp, t0.Add(2*time.Second), false, nil)
	if _, known := w.ChangedKeys(cmApp); known {
		t.Fatal("a change of unknown keys left the keys known")
	}
	w.Observe(cmApp, t0.Add(time.Minute), false, []string{"c"}) // a new window
	if keys, known := w.ChangedKeys(cmApp); !known || strings.Join(keys, ",") != "c" {
		t.Fatalf("keys %v %v in a new window, want c", keys, known)
	}
	w.Observe(secDB, t0, true, []string{"x"})
	if keys, _ := w.ChangedKeys(secDB); len(keys) != 0 {
		t.Fatalf("a creation's keys %v counted as changed keys", keys)
	}
	w.Observe(secDB, t0.Add(time.Second), false, []string{"y"}) // an update merged into the creation's window
	if keys, known := w.ChangedKeys(secDB); !known || strings.Join(keys, ",") != "y" {
		t.Fatalf("keys %v %v, want the update's y", keys, known)
	}
}
