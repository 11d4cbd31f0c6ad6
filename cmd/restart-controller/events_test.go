package main

import (
	"context"
	"os"
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
	recorder, stop, err := startEvents(context.Background(), client, &activity{}, hclog.NewNullLogger())
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
	recorder, stop, err := startEvents(context.Background(), client, restarts, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	written := func() bool {
		t.Helper()
		list, err := client.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=yields"})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items) > 0
	}
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
