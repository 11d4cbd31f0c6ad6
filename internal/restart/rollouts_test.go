package restart

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// Deployment statuses of its two replicas, for setStatus.
var (
	rolledOut  = map[string]interface{}{"replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(2)}
	rollingOut = map[string]interface{}{"replicas": int64(2), "updatedReplicas": int64(0), "availableReplicas": int64(2)}
	podLost    = map[string]interface{}{"replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(1)}
)

// unpacedRestart restarts the one reader of shop/app (an unpaced change)
// at reconcileNow, with its events recorded.
func unpacedRestart(t *testing.T) (*harness, catalog.WorkloadKey, *fakeRecorder) {
	t.Helper()
	u := settle(newHarness(t, nil, nil, nil), fromYAML(t, webDeployment), dataV1)
	h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, dataV2)
	events := &fakeRecorder{}
	h.c.Events = events
	key := keyOf(deploymentsGVR, u)
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if n := len(h.patches()); n != 1 {
		t.Fatalf("%d patches, want the restart", n)
	}
	if rec := recordOf(t, h, key); rec == nil || !rec.Unpaced {
		t.Fatalf("record %+v, want an unpaced restart's", rec)
	}
	return h, key, events
}

// setStatus writes the Deployment's status in the API server and the cache,
// as its controller and the informer would.
func setStatus(t *testing.T, h *harness, key catalog.WorkloadKey, status map[string]interface{}) {
	t.Helper()
	u, err := h.client.Resource(key.Resource).Namespace(key.Namespace).Get(context.Background(), key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(u.Object, status, "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Resource(key.Resource).Namespace(key.Namespace).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.cache(u)
}

func recordOf(t *testing.T, h *harness, key catalog.WorkloadKey) *record.LastRestart {
	t.Helper()
	u, err := h.client.Resource(key.Resource).Namespace(key.Namespace).Get(context.Background(), key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.ParseLastRestart(u.GetAnnotations()[rolloutKey])
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func reconcileAt(t *testing.T, h *harness, key catalog.WorkloadKey, at time.Time) {
	t.Helper()
	h.c.Clock = func() time.Time { return at }
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
}

func reasons(r *fakeRecorder) []string {
	var out []string
	for _, e := range r.events {
		out = append(out, e.reason)
	}
	return out
}

// An unpaced rollout that does not complete within its deadline fails, and
// that is written: the failure is reported, shown, and followed until it
// recovers.
func TestUnpacedRolloutFailureIsWritten(t *testing.T) {
	h, key, events := unpacedRestart(t)
	setStatus(t, h, key, rollingOut)
	reconcileAt(t, h, key, reconcileNow.Add(time.Minute))
	if n := len(h.patches()); n != 1 {
		t.Fatalf("%d patches while it rolls out, want the restart alone", n)
	}
	reconcileAt(t, h, key, reconcileNow.Add(11*time.Minute)) // past the 10m deadline
	if n := len(h.patches()); n != 2 {
		t.Fatalf("%d patches, want the restart and its failure", n)
	}
	if rec := recordOf(t, h, key); rec.Result != rollout.ResultFailed || rec.Reason != "DeadlineExceeded" {
		t.Fatalf("record %+v, want failed (DeadlineExceeded)", rec)
	}
	if got := reasons(events); len(got) != 2 || got[1] != "RolloutFailed" {
		t.Fatalf("events %v, want Restarted, RolloutFailed", got)
	}
}

// An unpaced rollout that completed is reported once and never judged
// again: a pod lost later (its status leaves Complete) is no rollout of
// the restart, neither reported complete again nor failed at the deadline.
func TestUnpacedRolloutCompletedThenPodLost(t *testing.T) {
	h, key, events := unpacedRestart(t)
	setStatus(t, h, key, rolledOut)
	reconcileAt(t, h, key, reconcileNow.Add(time.Minute))
	setStatus(t, h, key, podLost)
	reconcileAt(t, h, key, reconcileNow.Add(2*time.Minute))
	reconcileAt(t, h, key, reconcileNow.Add(11*time.Minute))
	h.c.followed.sweep(reconcileNow.Add(11 * time.Minute))
	reconcileAt(t, h, key, reconcileNow.Add(12*time.Minute))
	if n := len(h.patches()); n != 1 {
		t.Fatalf("%d patches, want the restart alone", n)
	}
	if got := reasons(events); len(got) != 2 || got[1] != "RolloutComplete" {
		t.Fatalf("events %v, want Restarted, RolloutComplete", got)
	}
	if n := len(h.c.followed.byKey); n != 0 {
		t.Fatalf("%d followed rollouts kept past the deadline", n)
	}
}

// A process that finds an unpaced restart's record without a result (the
// one that restarted it died) follows it while it rolls out inside its
// deadline, and reports its end. One that finds it complete, or past its
// deadline, leaves it: it cannot tell a failure from a completion its
// predecessor saw, and nothing waits on either.
func TestNewProcessFindsUnpacedRollout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		age      time.Duration
		status   map[string]interface{}
		later    map[string]interface{}
		patches  int
		reported []string
	}{
		{"rolling out inside its deadline: followed", time.Minute, rollingOut, rolledOut, 0, []string{"RolloutComplete"}},
		{"rolling out inside its deadline, then failed", time.Minute, rollingOut, rollingOut, 1, []string{"RolloutFailed"}},
		{"complete already: left", time.Minute, rolledOut, rolledOut, 0, nil},
		{"past its deadline: left", 11 * time.Minute, podLost, podLost, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := settle(newHarness(t, nil, nil, nil), fromYAML(t, webDeployment), dataV2)
			rec := &record.LastRestart{At: reconcileNow.Add(-tc.age), Unpaced: true, Restarts: []time.Time{reconcileNow.Add(-tc.age)}}
			u = withAnnotations(u, map[string]string{rolloutKey: record.Encode(rec)})
			if err := unstructured.SetNestedMap(u.Object, tc.status, "status"); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, dataV2)
			events := &fakeRecorder{}
			h.c.Events = events
			key := keyOf(deploymentsGVR, u)
			reconcileAt(t, h, key, reconcileNow)
			setStatus(t, h, key, tc.later)
			reconcileAt(t, h, key, reconcileNow.Add(10*time.Minute))
			if n := len(h.patches()); n != tc.patches {
				t.Fatalf("%d patches, want %d", n, tc.patches)
			}
			if got := reasons(events); len(got) != len(tc.reported) || len(got) > 0 && got[0] != tc.reported[0] {
				t.Fatalf("events %v, want %v", got, tc.reported)
			}
		})
	}
}

// An unpaced restart can be counted in flight by a change that became paced
// after it (more readers became due for the change its restart delivered).
// Its end is not written, but the readers waiting for that change's wave
// wait on it all the same: when its rollout is seen complete they are woken,
// as by a written end, instead of waiting for their wave's recheck (30 s).
func TestUnpacedRolloutEndWakesWaitingReaders(t *testing.T) {
	base := newHarness(t, nil, nil, nil)
	change := sourceState(t, cmApp, dataV2).Change(testSums)
	var objs []*unstructured.Unstructured
	for i := 0; i < 4; i++ {
		u := fromYAML(t, webDeployment)
		u.SetName(fmt.Sprintf("w%02d", i))
		if i > 0 {
			objs = append(objs, settle(base, u, dataV1)) // pending for the change
			continue
		}
		// w00 was restarted for the change while it reached at most
		// unpacedUpTo readers; it is rolling out.
		rec := &record.LastRestart{At: reconcileNow.Add(-10 * time.Second), Unpaced: true,
			Sources: map[string]string{cmApp.String(): change}, Restarts: []time.Time{reconcileNow.Add(-10 * time.Second)}}
		u = withAnnotations(settle(base, u, dataV2), map[string]string{rolloutKey: record.Encode(rec)})
		if err := unstructured.SetNestedMap(u.Object, rollingOut, "status"); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	h := newHarness(t, objs, objs, dataV2)
	keys := make([]catalog.WorkloadKey, len(objs))
	for i, u := range objs {
		keys[i] = keyOf(deploymentsGVR, u)
	}
	// Four readers, more than unpacedUpTo: the change is paced, and its first
	// wave (one) is w00's, still in flight. w00's own decision adopts its
	// rollout (a new process would too); the others wait.
	for i := len(keys) - 1; i >= 0; i-- {
		reconcileAt(t, h, keys[i], reconcileNow)
	}
	if n := len(h.patches()); n != 0 {
		t.Fatalf("%d patches while the first wave rolls out, want none", n)
	}
	drain := func() map[string]bool {
		seen := map[string]bool{}
		for h.c.queue.Len() > 0 {
			key, _ := h.c.queue.Get()
			seen[key.Name] = true
			h.c.queue.Done(key)
		}
		return seen
	}
	setStatus(t, h, keys[0], rolledOut)
	drain() // what caching enqueued: w00 itself
	reconcileAt(t, h, keys[0], reconcileNow.Add(time.Second))
	if n := len(h.patches()); n != 0 {
		t.Fatalf("%d patches, want none: an unpaced restart's end is not written", n)
	}
	if woken := drain(); !woken["w01"] {
		t.Fatalf("w01, first of the next wave, not woken when w00's rollout was seen complete (woken: %v)", woken)
	}
}
