package restart

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// LimitedRecorder passes Events on while a token bucket allows and drops the
// rest, counting them: a change of a source read by thousands of workloads
// must not turn into thousands of Event writes in one second. The restarts
// themselves are still logged and counted.
type LimitedRecorder struct {
	inner   events.EventRecorder
	limiter *rate.Limiter
	dropped prometheus.Counter
}

// NewLimitedRecorder allows perSecond Events on average, burst at once.
func NewLimitedRecorder(inner events.EventRecorder, perSecond float64, burst int, dropped prometheus.Counter) *LimitedRecorder {
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
