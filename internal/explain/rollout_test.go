package explain

import (
	"strings"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// An unpaced restart's record has no result written: explain reads its end
// from the workload's status, as the controller does; a written result, or
// a paced record, is shown as written.
func TestRolloutReportOfUnwrittenEnd(t *testing.T) {
	c := defaultConfig(t, "")
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		record record.LastRestart
		phase  rollout.Phase
		result string
		note   string
	}{
		{"unpaced, complete by its status", record.LastRestart{Unpaced: true}, rollout.Complete, "complete", "as the workload's status shows"},
		{"unpaced, still rolling", record.LastRestart{Unpaced: true}, rollout.Progressing, "rolling out", "followed until it completes"},
		{"unpaced, failed", record.LastRestart{Unpaced: true, Result: rollout.ResultFailed}, rollout.Complete, "failed", "held"},
		{"paced, rolling out", record.LastRestart{}, rollout.Complete, "rolling out", "followed until it completes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.record
			rec.At = at
			w := &catalog.WorkloadState{LastRestart: record.Encode(&rec), Rollout: rollout.Status{Phase: tc.phase}}
			r := c.rolloutReport(decision.ReadWorkload(w), rollout.DefaultDeadline)
			if r == nil || r.Result != tc.result || !strings.Contains(r.Note, tc.note) {
				t.Fatalf("report %+v, want result %q and a note with %q", r, tc.result, tc.note)
			}
		})
	}
}
