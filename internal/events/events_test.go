package events

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/restart-controller/restart-controller/internal/kube"
	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// The one API server the tests of this package share: client writes
// Events as the controller does, reader lists them as an operator would.
var (
	client *kube.Client
	reader kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "events", func(c *testcluster.Cluster) (err error) {
		if client, err = kube.New(c.RESTConfig); err != nil {
			return err
		}
		reader, err = kubernetes.NewForConfig(c.RESTConfig)
		return err
	}))
}

func newRecorder(queue int) (*Recorder, prometheus.Counter) {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	return New(client, kube.Scheme, "restart-controller", "restart-controller-test", queue, dropped, hclog.NewNullLogger()), dropped
}

// pod is an object to record Events on, in namespace default.
func pod(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: name, UID: types.UID("uid-" + name)}
}

// eventsAbout lists the Events about the Pod name.
func eventsAbout(t *testing.T, name string) []eventsv1.Event {
	t.Helper()
	list, err := reader.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within a minute: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An Event is written, with what tools/events would write.
func TestEventWritten(t *testing.T) {
	r, _ := newRecorder(QueueSize)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	r.Eventf(pod("written"), nil, corev1.EventTypeWarning, "KindDegraded", "Watch", "%s is %s", "apps/v1 daemonsets", "forbidden")
	var got []eventsv1.Event
	eventually(t, "the Event is written", func() bool { got = eventsAbout(t, "written"); return len(got) > 0 })
	e := got[0]
	if e.ReportingController != "restart-controller" || e.ReportingInstance != "restart-controller-test" ||
		e.Type != corev1.EventTypeWarning || e.Reason != "KindDegraded" || e.Action != "Watch" ||
		e.Note != "apps/v1 daemonsets is forbidden" || e.Regarding.Kind != "Pod" || e.EventTime.IsZero() || e.Series != nil {
		t.Fatalf("the Event is %+v", e)
	}
}

// Repeats of one Event become one Event with a series: written when the
// series starts, then its count when it ends; another note is another
// Event; a repeat after the series ended starts a new Event.
func TestRepeatsBecomeASeries(t *testing.T) {
	r, _ := newRecorder(QueueSize)
	now := time.Now()
	r.now = func() time.Time { return now }
	ctx := context.Background()
	seen := map[key]*cached{}
	observe := func(note string) {
		e, err := r.event(pod("repeated"), nil, corev1.EventTypeNormal, "Restarted", "Restart", note)
		if err != nil {
			t.Fatal(err)
		}
		r.observe(ctx, seen, e)
		now = now.Add(time.Second)
	}
	observe("one")
	observe("one")
	if got := eventsAbout(t, "repeated"); len(got) != 1 || got[0].Series == nil || got[0].Series.Count != 2 {
		t.Fatalf("after a repeat: %s; want one with a series of 2", summary(got))
	}
	observe("one")
	observe("one")
	observe("one")
	observe("two")
	r.sweep(ctx, seen, false) // nothing ended, no refresh: counts stay in memory
	if got := eventsAbout(t, "repeated"); len(got) != 2 || seriesCount(got, "one") != 2 {
		t.Fatalf("before the series ended: %s; want Events one (series of 2) and two", summary(got))
	}
	now = now.Add(finishTime + time.Second)
	r.sweep(ctx, seen, false)
	if got := eventsAbout(t, "repeated"); len(got) != 2 || seriesCount(got, "one") != 5 {
		t.Fatalf("after the series ended: %s; want the series of one at 5", summary(got))
	}
	if len(seen) != 0 {
		t.Fatalf("%d Events still cached after they ended", len(seen))
	}
	observe("one")
	if got := eventsAbout(t, "repeated"); len(got) != 3 {
		t.Fatalf("a repeat after the series ended: %d Events; want a new one", len(got))
	}
}

// summary is each Event's note and series count.
func summary(events []eventsv1.Event) string {
	out := fmt.Sprintf("%d Events:", len(events))
	for _, e := range events {
		var n int32
		if e.Series != nil {
			n = e.Series.Count
		}
		out += fmt.Sprintf(" %q (series %d)", e.Note, n)
	}
	return out
}

func seriesCount(events []eventsv1.Event, note string) int32 {
	for _, e := range events {
		if e.Note == note && e.Series != nil {
			return e.Series.Count
		}
	}
	return 0
}

// A series whose Event was deleted (expired) is written as a new Event.
func TestSeriesOfDeletedEvent(t *testing.T) {
	r, _ := newRecorder(QueueSize)
	ctx := context.Background()
	seen := map[key]*cached{}
	for i := range 2 {
		e, err := r.event(pod("deleted"), nil, corev1.EventTypeNormal, "Restarted", "Restart", "note")
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			for _, old := range eventsAbout(t, "deleted") {
				if err := reader.EventsV1().Events("default").Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		r.observe(ctx, seen, e)
	}
	if got := eventsAbout(t, "deleted"); len(got) != 1 || got[0].Series == nil || got[0].Series.Count != 2 {
		t.Fatalf("after the Event was deleted and repeated: %s; want it again, with a series of 2", summary(got))
	}
}

// Recording never waits: what the queue cannot hold is dropped and counted.
func TestFullQueueDrops(t *testing.T) {
	r, dropped := newRecorder(2) // not running: nothing leaves the queue
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			r.Eventf(pod("dropped"), nil, corev1.EventTypeNormal, "Restarted", "Restart", "note")
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Eventf blocked on a full queue")
	}
	if got := testutil.ToFloat64(dropped); got != 3 {
		t.Fatalf("dropped %v Events; want 3", got)
	}
}
