package restart

import (
	"encoding/json"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
)

// LimitedRecorder passes Events on while a token bucket allows and drops the
// rest, counting them: a change of a source read by thousands of workloads
// must not turn into thousands of Event writes in one second. The restarts
// themselves are still logged and counted.
type LimitedRecorder struct {
	inner   EventRecorder
	limiter *rate.Limiter
	dropped prometheus.Counter
}

// NewLimitedRecorder allows perSecond Events on average, burst at once.
func NewLimitedRecorder(inner EventRecorder, perSecond float64, burst int, dropped prometheus.Counter) *LimitedRecorder {
	return &LimitedRecorder{inner: inner, limiter: rate.NewLimiter(rate.Limit(perSecond), burst), dropped: dropped}
}

// Eventf records the Event unless the bucket is empty.
func (l *LimitedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if !l.limiter.Allow() {
		l.dropped.Inc()
		return
	}
	l.inner.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

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
	applied, _ := json.Marshal(plan.Applied) // a map of strings always encodes
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[catalog.WorkloadKey]simulatedPatch{}
	}
	s.byKey[key] = simulatedPatch{applied: string(applied), templateRecord: plan.TemplateRecord}
}

// forget drops the simulation of a workload that is gone or opted out.
func (s *simulatedPatches) forget(key catalog.WorkloadKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKey, key)
}
