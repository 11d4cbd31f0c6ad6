package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"
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
)

// eventsPacing is how Events yield to the restarts of a burst: on two
// cores, a restart Event per restart would double the API server's writes
// during a fan-out.
type eventsPacing struct {
	// Quiet: an Event is handed on once no restart write has been under
	// way for this long...
	Quiet time.Duration
	// MaxDelay: ...or once it has waited this long, so a fleet that
	// restarts without pause still reports. Longer than a fan-out of
	// 1,000 at 10,000 workloads (about 15 s).
	MaxDelay time.Duration
	// Capacity bounds the Events waiting; one more is handed on at once.
	// The limited recorder in front lets 20 a second through, so a minute
	// of waiting is at most 1,400.
	Capacity int
	// PerSecond paces the hand-over after a burst: each Event handed on
	// costs a goroutine of client-go's until it is written.
	PerSecond float64
}

var defaultEventsPacing = eventsPacing{Quiet: 250 * time.Millisecond, MaxDelay: 30 * time.Second, Capacity: 2000, PerSecond: 50}

// startEvents records events.k8s.io/v1 Events with client-go's tools/events,
// reported by component "restart-controller" from instance
// "restart-controller-<hostname>". Recording never blocks. Events wait as
// values in one bounded queue while restart writes (restarts: the
// controller's PATCHes) are under way, and are handed to client-go's
// recorder as they pause (see eventsPacing). From there the broadcaster
// writes each Event on a goroutine of its own, merges repeats into series
// and retries a write that did not reach the API server (up to twelve
// times, ten seconds apart).
//
// stop, called once nothing records any more, hands on what waits, waits
// up to eventsDrainTimeout for the Events recorded to be written, then
// shuts the broadcaster down and ends the retries.
func startEvents(ctx context.Context, client kubernetes.Interface, restarts *activity, pacing eventsPacing, log hclog.Logger) (recorder events.EventRecorder, stop func(), err error) {
	busy := &activity{}
	broadcaster := events.NewBroadcaster(trackedSink{EventSink: &events.EventSinkImpl{Interface: client.EventsV1()}, busy: busy})
	// Not cancelled with ctx: the Events of reconciles that finish while
	// the run drains are written too.
	sinkCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logging.Logr(log)))
	if err := broadcaster.StartRecordingToSinkWithContext(sinkCtx); err != nil {
		cancel()
		broadcaster.Shutdown()
		return nil, nil, fmt.Errorf("starting the Event broadcaster: %w", err)
	}
	waiting := newWaitingEvents(broadcaster.NewRecorder(scheme.Scheme, "restart-controller"), restarts, busy, pacing)
	handedOn := make(chan struct{})
	go func() {
		defer close(handedOn)
		waiting.run()
	}()
	stop = func() {
		waiting.close()
		<-handedOn
		busy.waitIdle(eventsQuiet, time.Now().Add(eventsDrainTimeout), nil)
		broadcaster.Shutdown()
		cancel()
	}
	return waiting, stop, nil
}

// waitingEvent is an Event recorded and not yet handed on: its note is
// formatted, and regarding is the controller's own reduced object.
type waitingEvent struct {
	regarding, related              runtime.Object
	eventtype, reason, action, note string
	at                              time.Time
}

// waitingEvents is the queue of Events that wait for the restarts to
// pause, and the one goroutine (run) that hands them on.
type waitingEvents struct {
	inner    events.EventRecorder
	restarts *activity
	// busy notes each Event handed on to inner, which stop drains.
	busy   *activity
	pacing eventsPacing
	pace   *rate.Limiter

	// closing is done once close is called: it ends every wait, and
	// from then on Events are handed on at once.
	closing     context.Context
	stopWaiting context.CancelFunc

	mu    sync.Mutex
	queue []waitingEvent
	wake  chan struct{} // a new Event, or close
}

func newWaitingEvents(inner events.EventRecorder, restarts, busy *activity, p eventsPacing) *waitingEvents {
	closing, stopWaiting := context.WithCancel(context.Background())
	return &waitingEvents{inner: inner, restarts: restarts, busy: busy, pacing: p, closing: closing, stopWaiting: stopWaiting,
		pace: rate.NewLimiter(rate.Limit(p.PerSecond), 1), wake: make(chan struct{}, 1)}
}

// Eventf queues the Event, or hands it on at once when the queue is full
// or closed.
func (w *waitingEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	e := waitingEvent{regarding: regarding, related: related, eventtype: eventtype, reason: reason, action: action,
		note: fmt.Sprintf(note, args...), at: time.Now()}
	w.mu.Lock()
	if w.closing.Err() != nil || len(w.queue) >= w.pacing.Capacity {
		w.mu.Unlock()
		w.handOn(e)
		return
	}
	w.queue = append(w.queue, e)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// close makes run hand on what waits without waiting, and return.
func (w *waitingEvents) close() {
	w.stopWaiting()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run hands the Events on in the order recorded, each once the restarts
// pause or it is overdue, paced; it returns once closed and empty.
func (w *waitingEvents) run() {
	for {
		e, ok := w.next()
		if !ok {
			return
		}
		w.handOn(e)
	}
}

// next waits until the oldest Event may be handed on, and takes it; false
// once closed and empty.
func (w *waitingEvents) next() (waitingEvent, bool) {
	for {
		w.mu.Lock()
		closed, n := w.closing.Err() != nil, len(w.queue)
		var oldest time.Time
		if n > 0 {
			oldest = w.queue[0].at
		}
		w.mu.Unlock()
		switch {
		case n == 0 && closed:
			return waitingEvent{}, false
		case n == 0:
			<-w.wake
			continue
		case !closed:
			w.restarts.waitIdle(w.pacing.Quiet, oldest.Add(w.pacing.MaxDelay), w.closing.Done())
			// Paced after the wait: a burst's Events go out at
			// PerSecond, not all at once.
			if err := w.pace.Wait(w.closing); err != nil {
				continue // closed: from now on every Event goes at once
			}
		}
		w.mu.Lock()
		e := w.queue[0]
		w.queue[0] = waitingEvent{} // the backing array must not keep it
		w.queue = w.queue[1:]
		w.mu.Unlock()
		return e, true
	}
}

func (w *waitingEvents) handOn(e waitingEvent) {
	w.busy.mark()
	w.inner.Eventf(e.regarding, e.related, e.eventtype, e.reason, e.action, "%s", e.note)
}

// trackedSink is the API server's Event sink, noting the writes under way,
// which stop drains.
type trackedSink struct {
	events.EventSink
	busy *activity
}

func (s trackedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.busy.begin()()
	return s.EventSink.Create(ctx, e)
}

func (s trackedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.busy.begin()()
	return s.EventSink.Update(ctx, e)
}

func (s trackedSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	defer s.busy.begin()()
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

// idleFor reports whether nothing is under way and nothing happened for
// quiet.
func (a *activity) idleFor(quiet time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inFlight == 0 && time.Since(a.last) >= quiet
}

// waitIdle waits until idleFor(quiet), the deadline passes or stop closes
// (nil: never).
func (a *activity) waitIdle(quiet time.Duration, deadline time.Time, stop <-chan struct{}) {
	for time.Now().Before(deadline) && !a.idleFor(quiet) {
		select {
		case <-stop:
			return
		case <-time.After(quiet / 4):
		}
	}
}
