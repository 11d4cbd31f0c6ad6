package restart

import (
	"encoding/json"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/catalog"
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

// reportedPlans remembers, in a dry run, the last plan reported per
// workload: nothing is written, so every later reconcile decides the same
// thing again, and saying it once is enough.
type reportedPlans struct {
	mu   sync.Mutex
	last map[catalog.WorkloadKey]string
}

// firstTime reports whether plan differs from the last one reported for key,
// and remembers it.
func (r *reportedPlans) firstTime(key catalog.WorkloadKey, plan Plan) bool {
	fingerprint, _ := json.Marshal(struct {
		Applied map[string]string
		Restart bool
	}{plan.Applied, plan.Restart})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[catalog.WorkloadKey]string{}
	}
	if r.last[key] == string(fingerprint) {
		return false
	}
	r.last[key] = string(fingerprint)
	return true
}

// forget drops what was reported for a workload that is gone.
func (r *reportedPlans) forget(key catalog.WorkloadKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
}
