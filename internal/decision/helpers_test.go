package decision

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision/decisiontest"
)

// Fixtures shared with the controller's tests.
var (
	sourceState   = decisiontest.SourceState
	sourceStateIn = decisiontest.SourceStateIn
	v1            = decisiontest.V1
	annotation    = decisiontest.Annotation
	testSums      = decisiontest.Sums
	otherKey      = decisiontest.OtherKey
)

type (
	sourceMap = Sources
	// dueAt is when each source's open grace period ends.
	dueAt map[catalog.SourceID]time.Time
)

// at returns a copy of a source state at the given resourceVersion.
func at(s *catalog.SourceState, rv string) *catalog.SourceState {
	out := s.DeepCopyObject().(*catalog.SourceState)
	out.ResourceVersion = rv
	return out
}

// graceOf are the grace periods ending as due says, holding updates of data
// that existed before, or (updating false) only creations.
func graceAt(due dueAt, updating bool) map[catalog.SourceID]Grace {
	out := map[catalog.SourceID]Grace{}
	for id, ends := range due {
		out[id] = Grace{Ends: ends, Updating: updating}
	}
	return out
}

// compare is Rules.Compare on a cached workload, with the rules a
// comparison reads.
func compare(w *catalog.WorkloadState, sources sourceMap, grace map[catalog.SourceID]Grace, now time.Time, ordered bool,
	life config.SourceLifecycle) Plan {
	return Rules{Ordered: ordered, Sums: testSums, Lifecycle: life}.Compare(ReadWorkload(w), sources, grace, now)
}

// decideWith decides as the controller does: a due restart's verdict that
// asks for the pacing facts is paced with p.
func decideWith(r Rules, s Snapshot, p Pacing) Verdict {
	v := r.Decide(s)
	if v.NeedsPacing {
		s.Pacing = &p
		v = r.Pace(s, v)
	}
	return v
}
