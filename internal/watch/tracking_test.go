package watch

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/templaterv"
)

var sendInitialEvents = true

func trackingFixture(t *testing.T) (*templaterv.Tracker, func(obj interface{}) *catalog.WorkloadState) {
	t.Helper()
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	tracker := templaterv.New(true)
	transform := tracker.Reduce(cfg.Workloads[0], cfg)
	return tracker, func(obj interface{}) *catalog.WorkloadState {
		t.Helper()
		out, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*catalog.WorkloadState)
	}
}

func deployment(rv, image string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"spec": map[string]interface{}{"template": map[string]interface{}{"spec": map[string]interface{}{
			"containers": []interface{}{map[string]interface{}{"name": "app", "image": image}},
		}}},
	}}
	u.SetNamespace("shop")
	u.SetName("web")
	u.SetUID("u1")
	u.SetResourceVersion(rv)
	return u
}

func initialEventsEnd(rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "apps/v1", "kind": "Deployment"}}
	u.SetResourceVersion(rv)
	u.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	return u
}

// The informer's streaming list (sendInitialEvents) delivers states as ADDED
// events, then a bookmark; only the events after it are writes whose
// resourceVersion is that of a template change.
func TestTrackWatchInitialEvents(t *testing.T) {
	tracker, reduce := trackingFixture(t)
	fake := watch.NewFake()
	w := trackWatch(fake, metav1.ListOptions{SendInitialEvents: &sendInitialEvents, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, tracker)
	go func() {
		fake.Add(deployment("10", "web:1"))
		fake.Action(watch.Bookmark, deployment("11", "web:1")) // a bookmark that does not end them
		fake.Modify(deployment("12", "web:2"))                 // still an initial state
		fake.Action(watch.Bookmark, initialEventsEnd("13"))
		fake.Modify(deployment("20", "web:3"))
		fake.Stop()
	}()
	var got []string
	for ev := range w.ResultChan() {
		if ev.Type == watch.Bookmark {
			continue
		}
		// As the reflector does: each event is transformed before the next is taken.
		got = append(got, ev.Object.(*unstructured.Unstructured).GetResourceVersion()+"->"+reduce(ev.Object).TemplateRV)
	}
	want := []string{"10->", "12->", "20->20"}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	w.Stop()
}

// A watch from a resourceVersion sends writes only; one from "" or "0" sends
// states first with no marker where they end, so nothing it sends is exact.
func TestTrackWatchFromAResourceVersion(t *testing.T) {
	for _, tc := range []struct {
		rv   string
		want string
	}{{"9", "20"}, {"0", ""}, {"", ""}} {
		tracker, reduce := trackingFixture(t)
		tracker.BeginList()
		reduce(deployment("9", "web:1"))
		fake := watch.NewFake()
		if w := trackWatch(fake, metav1.ListOptions{ResourceVersion: tc.rv}, tracker); w != watch.Interface(fake) {
			t.Errorf("rv %q: watch wrapped without initial events", tc.rv)
		}
		if got := reduce(deployment("20", "web:2")).TemplateRV; got != tc.want {
			t.Errorf("watch from %q: TemplateRV %q, want %q", tc.rv, got, tc.want)
		}
	}
}

// Stopping the wrapper ends its goroutine even while it waits to hand an
// event over, and closes the channel the reflector reads.
func TestInitialEventsWatchStops(t *testing.T) {
	tracker, _ := trackingFixture(t)
	fake := watch.NewFake()
	w := trackWatch(fake, metav1.ListOptions{SendInitialEvents: &sendInitialEvents}, tracker)
	sent := make(chan struct{})
	go func() {
		fake.Add(deployment("10", "web:1")) // taken by the wrapper, never read from it
		close(sent)
	}()
	<-sent
	w.Stop()
	w.Stop() // twice: no panic
	closed := make(chan struct{})
	go func() {
		for range w.ResultChan() {
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the result channel stays open after Stop")
	}
}

// A deleted workload is forgotten by the tracker, so its memory stays bounded.
func TestWorkloadHandlerForgetsDeletedWorkloads(t *testing.T) {
	tracker, reduce := trackingFixture(t)
	tracker.BeginWatch(true)
	state := reduce(deployment("5", "web:1"))
	h := workloadHandler{resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, handler: &recorder{}, tracker: tracker}
	h.OnDelete(state)
	if tracker.Len() != 0 {
		t.Fatal("deleted workload remembered")
	}
	workloadHandler{handler: &recorder{}}.OnDelete(state) // no tracker: ordering off
}
