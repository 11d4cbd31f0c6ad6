package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// An Event recorded just before the run stops is written by the time stop
// returns (the broadcaster is drained, not dropped), as an events.k8s.io/v1
// Event reported by restart-controller from restart-controller-<hostname>,
// as client-go's tools/events names the instance.
func TestEventsStopWritesWhatWasRecorded(t *testing.T) {
	client, err := kubernetes.NewForConfig(apiServer(t).RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	recorder, stop, err := startEvents(context.Background(), client, &activity{}, defaultEventsPacing, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "drained"}
	recorder.Eventf(regarding, nil, corev1.EventTypeNormal, "Recorded", "Test", "recorded before the stop")
	stop()

	list, err := client.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var about []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == regarding.Name {
			about = append(about, e)
		}
	}
	if len(about) != 1 {
		t.Fatalf("%d Events about the ConfigMap once stop returned; want the one recorded", len(about))
	}
	e := about[0]
	if e.Reason != "Recorded" || e.Note != "recorded before the stop" || e.ReportingController != "restart-controller" ||
		e.ReportingInstance != "restart-controller-"+hostname {
		t.Fatalf("the Event is %+v", e)
	}
}

// An Event's write waits while a restart write is under way and goes out
// once the restarts pause: the Events of a burst never take the API
// server's time from its restarts.
func TestEventsYieldToRestarts(t *testing.T) {
	client, err := kubernetes.NewForConfig(apiServer(t).RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	restarts := &activity{}
	recorder, stop, err := startEvents(context.Background(), client, restarts, defaultEventsPacing, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	written := func() bool { return countEvents(t, client, "regarding.name=yields") > 0 }
	end := restarts.begin() // a restart PATCH under way
	regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "yields"}
	recorder.Eventf(regarding, nil, corev1.EventTypeNormal, "Recorded", "Test", "recorded during a restart")
	// Written at once (tens of milliseconds) when it does not wait; 2 s
	// is well inside eventsMaxDelay.
	for until := time.Now().Add(2 * time.Second); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
		if written() {
			t.Fatal("the Event was written while a restart write was under way")
		}
	}
	end()
	for deadline := time.Now().Add(30 * time.Second); !written(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Event was not written once the restarts paused")
		}
	}
}

// The Events of a burst wait as values, not as goroutines: while a restart
// write is under way, hundreds of Events recorded leave the goroutine count
// where it was (client-go's broadcaster would take one each), none is
// written, and every one is written once the restarts pause.
func TestEventsWaitAsValues(t *testing.T) {
	client, err := kubernetes.NewForConfig(apiServer(t).RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	restarts := &activity{}
	pacing := defaultEventsPacing
	pacing.PerSecond = 1000 // the test need not wait for the pace
	recorder, stop, err := startEvents(context.Background(), client, restarts, pacing, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const n = 300
	waited := func() int { return countEvents(t, client, "reason=Waited") }
	end := restarts.begin() // a restart PATCH under way
	before := runtime.NumGoroutine()
	for i := range n {
		regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: fmt.Sprintf("waits-%d", i)}
		recorder.Eventf(regarding, nil, corev1.EventTypeNormal, "Waited", "Test", "recorded during a burst, %d of %d", i+1, n)
	}
	time.Sleep(500 * time.Millisecond) // what would start goroutines has started
	if grown := runtime.NumGoroutine() - before; grown > 10 {
		t.Fatalf("%d more goroutines with %d Events waiting", grown, n)
	}
	if got := waited(); got != 0 {
		t.Fatalf("%d Events written while a restart write was under way", got)
	}
	end()
	for deadline := time.Now().Add(60 * time.Second); waited() != n; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Events written once the restarts paused", waited(), n)
		}
	}
}

// A fleet that restarts without pause still reports: an Event waits at
// most MaxDelay.
func TestEventsWaitAtMostMaxDelay(t *testing.T) {
	client, err := kubernetes.NewForConfig(apiServer(t).RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	restarts := &activity{}
	pacing := defaultEventsPacing
	pacing.MaxDelay = time.Second
	recorder, stop, err := startEvents(context.Background(), client, restarts, pacing, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	defer restarts.begin()() // restart writes under way for the whole test
	regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "overdue"}
	recorder.Eventf(regarding, nil, corev1.EventTypeNormal, "Overdue", "Test", "recorded during endless restarts")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if countEvents(t, client, "regarding.name=overdue") > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the Event was not written past its MaxDelay while restarts went on")
		}
	}
}

// countEvents counts the Events in namespace default that fieldSelector
// selects.
func countEvents(t *testing.T, client kubernetes.Interface, fieldSelector string) int {
	t.Helper()
	list, err := client.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}
