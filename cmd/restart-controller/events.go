package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/logging"
	"github.com/restart-controller/restart-controller/internal/restart"
)

const (
	// eventsDrainTimeout bounds how long a stopping run waits for the
	// Events under way to be written (an API server that does not answer
	// would otherwise hold it through client-go's twelve tries).
	eventsDrainTimeout = 5 * time.Second
	// eventsQuiet is how long nothing may have been recorded or begun to be
	// written before the Events under way count as written: client-go's
	// recorder hands each Event to the broadcaster on a goroutine of its
	// own, and the broadcaster each to the sink on another, so an Event
	// recorded just before the stop reaches the sink a moment after it.
	eventsQuiet = 100 * time.Millisecond
	// restartsQuiet and eventsMaxDelay are how an Event's write yields to
	// the restarts of a burst: it waits until no restart write has been
	// under way for restartsQuiet, so that on two cores the API server
	// serves the restarts first (a restart Event per restart would double
	// the writes of a fan-out), but never longer than eventsMaxDelay, so a
	// fleet that restarts without pause still reports.
	restartsQuiet  = 250 * time.Millisecond
	eventsMaxDelay = 10 * time.Second
)

// startEvents records events.k8s.io/v1 Events with client-go's tools/events,
// reported by component "restart-controller" from instance
// "restart-controller-<hostname>". Recording never blocks: the broadcaster
// writes each Event on a goroutine of its own, merges repeats into series
// and retries a write that did not reach the API server (up to twelve times,
// ten seconds apart). The LimitedRecorder in front of it bounds how many
// Events per second reach it, and so how many writes can be under way while
// the API server is slow.
//
// Each write waits first for the restart writes (restarts: the controller's
// PATCHes) to pause; see restartsQuiet.
//
// stop, called once nothing records any more, waits up to
// eventsDrainTimeout for the Events recorded to be written, then shuts the
// broadcaster down and ends the retries.
func startEvents(ctx context.Context, client kubernetes.Interface, restarts *activity, log hclog.Logger) (recorder events.EventRecorder, stop func(), err error) {
	busy := &activity{}
	broadcaster := events.NewBroadcaster(trackedSink{EventSink: &events.EventSinkImpl{Interface: client.EventsV1()}, busy: busy, restarts: restarts})
	// Not cancelled with ctx: the Events of reconciles that finish while
	// the run drains are written too.
	sinkCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logging.Logr(log)))
	if err := broadcaster.StartRecordingToSinkWithContext(sinkCtx); err != nil {
		cancel()
		broadcaster.Shutdown()
		return nil, nil, fmt.Errorf("starting the Event broadcaster: %w", err)
	}
	stop = func() {
		busy.waitIdle(eventsQuiet, eventsDrainTimeout)
		broadcaster.Shutdown()
		cancel()
	}
	return trackedRecorder{EventRecorder: broadcaster.NewRecorder(scheme.Scheme, "restart-controller"), busy: busy}, stop, nil
}

// trackedRecorder is client-go's recorder, noting each Event recorded.
type trackedRecorder struct {
	events.EventRecorder
	busy *activity
}

func (r trackedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.busy.mark()
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// trackedSink is the API server's Event sink, noting the writes under way
// (a write waiting for the restarts counts: stop drains it too), each
// written once the restarts pause.
type trackedSink struct {
	events.EventSink
	busy, restarts *activity
}

func (s trackedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.busy.begin()()
	s.restarts.waitIdle(restartsQuiet, eventsMaxDelay)
	return s.EventSink.Create(ctx, e)
}

func (s trackedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.busy.begin()()
	s.restarts.waitIdle(restartsQuiet, eventsMaxDelay)
	return s.EventSink.Update(ctx, e)
}

func (s trackedSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	defer s.busy.begin()()
	s.restarts.waitIdle(restartsQuiet, eventsMaxDelay)
	return s.EventSink.Patch(ctx, e, data)
}

// trackedPatch is patch, noting each write under way in restarts.
func trackedPatch(patch restart.PatchFunc, restarts *activity) restart.PatchFunc {
	return func(ctx context.Context, key catalog.WorkloadKey, body []byte) error {
		defer restarts.begin()()
		return patch(ctx, key, body)
	}
}

// activity is when something (an Event recorded, a write) last happened,
// and how many writes are under way.
type activity struct {
	mu       sync.Mutex
	inFlight int
	last     time.Time
}

// mark notes that something happened now.
func (a *activity) mark() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = time.Now()
}

// begin notes a write under way from now until the returned func is called.
func (a *activity) begin() (end func()) {
	a.mu.Lock()
	a.inFlight++
	a.last = time.Now()
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.inFlight--
		a.mu.Unlock()
	}
}

// waitIdle waits until nothing is under way and nothing happened for quiet,
// or at most timeout.
func (a *activity) waitIdle(quiet, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		idle := a.inFlight == 0 && time.Since(a.last) >= quiet
		a.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(quiet / 4)
	}
}
