// Package events records events.k8s.io/v1 Events as client-go's
// tools/events does, without linking it (it imports client-go's whole typed
// clientset): asynchronously through a bounded queue, so that recording
// never blocks a reconcile, and merging repeats of one Event into a series,
// so that an incident that repeats does not flood etcd.
//
// What follows client-go (tools/events, event_broadcaster.go): the Event's
// name, fields and reporting instance; a repeat of a cached Event within
// finishTime of its last observation becomes a series, written once when it
// starts (count 2) and then every refreshTime and when it ends, the counts
// between kept in memory; a series patch of an Event that is gone creates it
// again; transport errors are retried, a rejected Event is abandoned. Two
// differences: repeats are matched on the note too (the same reason with
// another note is another Event, not one more of a series), and one goroutine
// writes Events one at a time, so a queue that fills during an outage drops
// what does not fit and counts it rather than growing.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
)

// The constants of client-go's tools/events.
const (
	// finishTime ends a series (and forgets an Event) not observed for this long.
	finishTime = 6 * time.Minute
	// refreshTime is how often the count of a series under way is written.
	refreshTime = 30 * time.Minute
	// maxTries and retrySleep bound the writes of one Event while the API
	// server cannot be reached.
	maxTries   = 12
	retrySleep = 10 * time.Second
	// QueueSize is the default capacity of the queue (client-go's maxQueuedEvents).
	QueueSize = 1000
	// maxNoteLength is the longest note the API server accepts (1 kB).
	maxNoteLength = 1024
	// sweepInterval is how often ended series are looked for.
	sweepInterval = time.Minute
)

// Sink writes Events: internal/kube's Client in the controller.
type Sink interface {
	CreateEvent(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error)
	PatchEvent(ctx context.Context, namespace, name string, patch []byte) (*eventsv1.Event, error)
}

// Recorder records Events; Run writes them.
type Recorder struct {
	sink       Sink
	scheme     *runtime.Scheme
	controller string
	instance   string
	queue      chan *eventsv1.Event
	dropped    prometheus.Counter
	log        hclog.Logger
	now        func() time.Time
	retrySleep time.Duration
}

// New returns a recorder of Events reported by controller (its instance:
// which replica) that queues at most queueSize Events, counting those it
// drops in dropped. scheme names the kinds of objects given without their
// apiVersion and kind.
func New(sink Sink, scheme *runtime.Scheme, controller, instance string, queueSize int, dropped prometheus.Counter, log hclog.Logger) *Recorder {
	return &Recorder{
		sink: sink, scheme: scheme, controller: controller, instance: instance,
		queue: make(chan *eventsv1.Event, queueSize), dropped: dropped, log: log, now: time.Now, retrySleep: retrySleep,
	}
}

// Eventf queues an Event about regarding (and related, which may be nil)
// without waiting: when the queue is full the Event is dropped and counted.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	event, err := r.event(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		r.log.Error("not recording an Event", "reason", reason, "error", err)
		return
	}
	select {
	case r.queue <- event:
	default:
		r.dropped.Inc()
	}
}

// event is client-go's generateEvent.
func (r *Recorder) event(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		return nil, fmt.Errorf("unsupported event type %q", eventtype)
	}
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		return nil, fmt.Errorf("referring to the object the Event is about: %w", err)
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		if relatedRef, err = reference.GetReference(r.scheme, related); err != nil {
			return nil, fmt.Errorf("referring to the related object: %w", err)
		}
	}
	if len(note) > maxNoteLength {
		note = note[:maxNoteLength]
	}
	now := r.now()
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// key identifies the repeats of one Event.
type key struct {
	eventType, action, reason, note string
	regarding, related              corev1.ObjectReference
}

func keyOf(e *eventsv1.Event) key {
	k := key{eventType: e.Type, action: e.Action, reason: e.Reason, note: e.Note, regarding: e.Regarding}
	if e.Related != nil {
		k.related = *e.Related
	}
	return k
}

// cached is an Event as last written, and whether its series has
// observations not written yet.
type cached struct {
	event   *eventsv1.Event
	pending bool
}

// Run writes the queued Events until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	seen := map[key]*cached{}
	sweep := time.NewTicker(sweepInterval)
	defer sweep.Stop()
	lastRefresh := r.now()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-r.queue:
			r.observe(ctx, seen, e)
		case <-sweep.C:
			refresh := r.now().Sub(lastRefresh) >= refreshTime
			if refresh {
				lastRefresh = r.now()
			}
			r.sweep(ctx, seen, refresh)
		}
	}
}

// observe writes a new Event, or counts a repeat of a cached one.
func (r *Recorder) observe(ctx context.Context, seen map[key]*cached, e *eventsv1.Event) {
	k := keyOf(e)
	c, ok := seen[k]
	if !ok {
		seen[k] = &cached{event: e}
		r.write(ctx, e)
		return
	}
	now := metav1.NewMicroTime(r.now())
	if c.event.Series != nil {
		c.event.Series.Count++
		c.event.Series.LastObservedTime = now
		c.pending = true
		return
	}
	c.event.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: now}
	r.write(ctx, c.event)
}

// sweep forgets Events not observed for finishTime, writing the last
// count of a series first, and with refresh writes every series's count.
func (r *Recorder) sweep(ctx context.Context, seen map[key]*cached, refresh bool) {
	cutoff := r.now().Add(-finishTime)
	for k, c := range seen {
		last := c.event.EventTime.Time
		if c.event.Series != nil {
			last = c.event.Series.LastObservedTime.Time
		}
		ended := last.Before(cutoff)
		if (ended || refresh) && c.pending {
			c.pending = false
			r.write(ctx, c.event)
		}
		if ended {
			delete(seen, k)
		}
	}
}

// write writes the Event (a series: its series), retrying while the API
// server cannot be reached.
func (r *Recorder) write(ctx context.Context, e *eventsv1.Event) {
	for tries := 1; ; tries++ {
		retry, err := r.writeOnce(ctx, e)
		if err == nil || !retry {
			if err != nil {
				r.log.Warn("the API server rejected an Event; not retrying", "reason", e.Reason, "regarding", describe(e.Regarding), "error", err)
			}
			return
		}
		if tries >= maxTries || ctx.Err() != nil {
			r.log.Warn("not writing an Event: the API server cannot be reached", "reason", e.Reason, "regarding", describe(e.Regarding),
				"tries", tries, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(r.retrySleep, 0.25)):
		}
	}
}

// writeOnce is client-go's recordEvent: it says whether a failed write may
// be tried again.
func (r *Recorder) writeOnce(ctx context.Context, e *eventsv1.Event) (retry bool, err error) {
	series := e.Series != nil
	if series {
		patch, _ := json.Marshal(map[string]any{"series": e.Series}) // an EventSeries always encodes
		_, err = r.sink.PatchEvent(ctx, e.Namespace, e.Name, patch)
	}
	if !series || apierrors.IsNotFound(err) {
		fresh := e.DeepCopy()
		fresh.ResourceVersion = ""
		_, err = r.sink.CreateEvent(ctx, fresh)
	}
	if err == nil {
		return false, nil
	}
	var construction *rest.RequestConstructionError
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &construction):
		return false, err
	case apierrors.IsAlreadyExists(err):
		// A series created again while its Event reappeared: patch it next time.
		return series, err
	case errors.As(err, &status):
		return false, err
	}
	return true, err
}

func describe(ref corev1.ObjectReference) string {
	return fmt.Sprintf("%s %s/%s", ref.Kind, ref.Namespace, ref.Name)
}
