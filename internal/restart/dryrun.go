package restart

import (
	"sync"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
)

// simulatedPatches holds, in a dry run, what each workload would carry had
// its patches been written. Decisions read the workload through it, so a dry
// run behaves as the real controller would after its own writes: a workload
// is recorded once, later restarted when its data changes, and the same
// decision is not reported twice.
type simulatedPatches struct {
	mu    sync.Mutex
	byKey map[catalog.WorkloadKey]simulatedPatch
}

type simulatedPatch struct{ applied, templateRecord string }

// overlay returns w as it would be after the patches simulated for it.
func (s *simulatedPatches) overlay(key catalog.WorkloadKey, w *catalog.WorkloadState) *catalog.WorkloadState {
	s.mu.Lock()
	p, ok := s.byKey[key]
	s.mu.Unlock()
	if !ok {
		return w
	}
	out := *w // the cached object is shared and never changed
	out.Applied, out.HasApplied, out.AppliedTemplateHash = p.applied, true, p.templateRecord
	return &out
}

// remember simulates writing plan to the workload.
func (s *simulatedPatches) remember(key catalog.WorkloadKey, plan decision.Plan) {
	applied := record.EncodeApplied(plan.Applied)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[catalog.WorkloadKey]simulatedPatch{}
	}
	s.byKey[key] = simulatedPatch{applied: applied, templateRecord: plan.TemplateRecord}
}

// forget drops the simulation of a workload that is gone or opted out.
func (s *simulatedPatches) forget(key catalog.WorkloadKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKey, key)
}
