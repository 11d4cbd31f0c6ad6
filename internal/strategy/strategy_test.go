package strategy

import (
	"testing"
	"time"
)

// TestTime: the time a timestampAt strategy writes is now in seconds, after
// the one already there, or Argo Rollouts restarts nothing.
func TestTime(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	for current, want := range map[string]string{
		"":                     "2030-01-02T03:04:05Z",
		"garbage":              "2030-01-02T03:04:05Z",
		"2030-01-02T03:04:04Z": "2030-01-02T03:04:05Z",
		"2030-01-02T03:04:05Z": "2030-01-02T03:04:06Z",
		"2030-01-02T03:04:09Z": "2030-01-02T03:04:10Z",
	} {
		if got := Time(now, current); got != want {
			t.Errorf("Time(now, %q) = %s, want %s", current, got, want)
		}
	}
}
