package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A restart's rollout counts as recorded complete when the controller
// writes "complete", or, for an unpaced restart whose end the controller
// does not write, once the Deployment's status is complete; never before.
func TestFleetWatchRecordedComplete(t *testing.T) {
	deployment := func(stamp, record string, ready bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app-00", Generation: 2,
			Annotations: map[string]string{appliedAnnotation: "x", rolloutAnno: record}}}
		d.Spec.Template.Annotations = map[string]string{restartAnnotation: stamp}
		if ready {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
		}
		return d
	}
	for _, tt := range []struct {
		name, rolling, ended string
	}{
		{"paced, end written", `{"at":"2030-01-01T00:00:00Z"}`, `{"at":"2030-01-01T00:00:00Z","result":"complete"}`},
		{"unpaced, end read from the status", `{"at":"2030-01-01T00:00:00Z","unpaced":true}`, `{"at":"2030-01-01T00:00:00Z","unpaced":true}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &fleetWatch{deps: fleetSnapshot{}}
			now := time.Now()
			w.observe(nil, deployment("", "", true), now)
			w.observe(deployment("", "", true), deployment("t1", tt.rolling, false), now)
			if d := w.snapshot()["app-00"]; !d.recordedAt.IsZero() {
				t.Fatalf("recorded complete while rolling out: %+v", d)
			}
			w.observe(deployment("t1", tt.rolling, false), deployment("t1", tt.ended, true), now)
			if d := w.snapshot()["app-00"]; d.recordedAt.IsZero() || d.completeAt.IsZero() {
				t.Fatalf("not recorded complete once complete: %+v", d)
			}
		})
	}
}
