package restart

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
)

// fleetHarness is n Deployments w00..wNN reading every key of ConfigMap
// shop/app, recorded with dataV1, in the fake API server and the cache; the
// source holds dataV2, its grace period over.
type fleetHarness struct {
	*harness
	keys []catalog.WorkloadKey
	rec  *fakeRecorder
}

func newFleetHarness(t testing.TB, n int) *fleetHarness {
	t.Helper()
	var objs []*unstructured.Unstructured
	base := newHarness(t, nil, nil, nil)
	for i := 0; i < n; i++ {
		u := fromYAML(t, webDeployment)
		u.SetName(fmt.Sprintf("w%02d", i))
		objs = append(objs, settle(base, u, dataV1))
	}
	h := newHarness(t, objs, objs, dataV2)
	f := &fleetHarness{harness: h, rec: &fakeRecorder{}}
	h.c.Events = f.rec
	for _, u := range objs {
		f.keys = append(f.keys, keyOf(deploymentsGVR, u))
	}
	return f
}

// reconcileAll reconciles every workload, last first (the order must not
// matter), and returns the names of those restarted by it.
func (f *fleetHarness) reconcileAll() []string {
	f.t.Helper()
	before := len(f.client.Actions())
	for i := len(f.keys) - 1; i >= 0; i-- {
		if err := f.c.Reconcile(context.Background(), f.keys[i]); err != nil {
			f.t.Fatal(err)
		}
	}
	return f.restartedSince(before)
}

func (f *fleetHarness) restartedSince(before int) []string {
	var names []string
	for _, a := range f.client.Actions()[before:] {
		if p, ok := a.(interface{ GetPatch() []byte }); ok && strings.Contains(string(p.GetPatch()), timestampKey) {
			names = append(names, a.(interface{ GetName() string }).GetName())
		}
	}
	sort.Strings(names)
	return names
}

func (f *fleetHarness) get(name string) *unstructured.Unstructured {
	f.t.Helper()
	u, err := f.client.Resource(deploymentsGVR).Namespace("shop").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

// sync brings the cache up to the fake API server, as the informer would.
func (f *fleetHarness) sync() {
	for _, k := range f.keys {
		f.cache(f.get(k.Name))
	}
}

// rollOut gives the named workloads the status of a finished rollout.
func (f *fleetHarness) rollOut(names ...string) {
	f.t.Helper()
	for _, name := range names {
		u := f.get(name)
		if err := unstructured.SetNestedMap(u.Object, map[string]interface{}{
			"replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(2),
		}, "status"); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.client.Resource(deploymentsGVR).Namespace("shop").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fleetHarness) record(name string) *record.LastRestart {
	f.t.Helper()
	r, err := record.ParseLastRestart(f.get(name).GetAnnotations()[rolloutKey])
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fleetHarness) hold(name string) *record.Hold {
	f.t.Helper()
	h, err := record.ParseHold(f.get(name).GetAnnotations()[holdKey])
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// step syncs the cache, reconciles everything and returns what restarted.
func (f *fleetHarness) step() []string {
	f.sync()
	return f.reconcileAll()
}

// Waves of 1, 2, 4, ... in name order, each let through once every rollout
// of the change so far has completed; the record of each restart names the
// change it delivered.
func TestWavesOpenOnCompletedRollouts(t *testing.T) {
	f := newFleetHarness(t, 10)
	change := sourceState(t, cmApp, dataV2).Change(testSums)
	if got := f.reconcileAll(); !reflect.DeepEqual(got, []string{"w00"}) {
		t.Fatalf("first wave %v, want [w00]", got)
	}
	if r := f.record("w00"); !r.InFlight() || r.Sources[cmApp.String()] != change || !r.At.Equal(reconcileNow) {
		t.Fatalf("record %+v", r)
	}
	// While w00 rolls out, nothing more.
	if got := f.step(); len(got) != 0 {
		t.Fatalf("restarted %v while the first wave rolls out", got)
	}
	f.rollOut("w00")
	f.step() // w00's outcome is recorded...
	if r := f.record("w00"); r.Result != "complete" {
		t.Fatalf("w00 record %+v", r)
	}
	if got := f.step(); !reflect.DeepEqual(got, []string{"w01", "w02"}) {
		t.Fatalf("second wave %v, want [w01 w02]", got)
	}
	f.rollOut("w01") // half the wave done: the next one waits
	f.step()
	if got := f.step(); len(got) != 0 {
		t.Fatalf("restarted %v with w02 still rolling out", got)
	}
	f.rollOut("w02")
	f.step()
	if got := f.step(); !reflect.DeepEqual(got, []string{"w03", "w04", "w05", "w06"}) {
		t.Fatalf("third wave %v", got)
	}
	if n := testutil.ToFloat64(f.c.Metrics.Rollouts.WithLabelValues("complete")); n != 3 {
		t.Fatalf("rollouts complete %v, want 3", n)
	}
	var complete int
	for _, e := range f.rec.events {
		if e.reason == "RolloutComplete" {
			complete++
		}
	}
	if complete != 3 {
		t.Fatalf("%d RolloutComplete events, want 3: %+v", complete, f.rec.events)
	}
}

// A rollout that does not complete within the deadline fails and halts the
// change: every other reader gets a hold naming the source, the change and
// the failure, once, with a RestartHeld Event; the gauge counts them. A
// release annotation with the change's ID lets the change go on.
func TestFailedRolloutHoldsTheRestAndReleaseResumes(t *testing.T) {
	f := newFleetHarness(t, 10)
	change := sourceState(t, cmApp, dataV2).Change(testSums)
	f.reconcileAll()
	f.sync()
	f.c.Clock = func() time.Time { return reconcileNow.Add(11 * time.Minute) } // past the 10m deadline
	f.reconcileAll()
	if r := f.record("w00"); r.Result != "failed" || r.Reason != "DeadlineExceeded" {
		t.Fatalf("w00 record %+v", r)
	}
	if got := f.step(); len(got) != 0 {
		t.Fatalf("restarted %v after the first wave failed", got)
	}
	for _, k := range f.keys[1:] {
		h := f.hold(k.Name)
		if h == nil || h.Kind != record.HoldWave || h.Source != cmApp.String() || h.Change != change ||
			!strings.HasPrefix(h.Cause, "deployments.apps/shop/w00: DeadlineExceeded") {
			t.Fatalf("%s hold %+v", k.Name, h)
		}
	}
	if n := testutil.ToFloat64(f.c.Metrics.Rollouts.WithLabelValues("failed")); n != 1 {
		t.Fatalf("failed rollouts %v", n)
	}
	held := func() int {
		var n int
		for _, e := range f.rec.events {
			if e.reason == "RestartHeld" {
				n++
			}
		}
		return n
	}
	if held() != 9 {
		t.Fatalf("%d RestartHeld events, want 9", held())
	}
	note := f.rec.events[len(f.rec.events)-1].note
	if !strings.Contains(note, "kubectl annotate configmap app -n shop "+releaseKey+"="+change) {
		t.Fatalf("RestartHeld note %q does not say how to release", note)
	}
	gauge := func() float64 { return testutil.ToFloat64(f.c.Metrics.Held.WithLabelValues("wave")) }
	if gauge() != 9 {
		t.Fatalf("held gauge %v, want 9", gauge())
	}
	// Decided again (a restart of the controller does the same): no new
	// writes, no new Events, still held.
	patches, events := len(f.patches()), len(f.rec.events)
	f.step()
	if len(f.patches()) != patches || len(f.rec.events) != events || gauge() != 9 {
		t.Fatalf("held workloads decided again into %d patches, events %v", len(f.patches())-patches, f.rec.events[events:])
	}
	// A fresh controller over the same cluster holds them just the same.
	fresh := newHarness(t, nil, nil, dataV2)
	fresh.client, fresh.c.Client, fresh.c.Patch = f.client, f.client, dynamicPatch(f.client)
	for _, k := range f.keys {
		fresh.cache(f.get(k.Name))
	}
	fresh.c.Clock = f.c.Clock
	for _, k := range f.keys {
		if err := fresh.c.Reconcile(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.patches()) != patches {
		t.Fatalf("a fresh controller wrote %d patches", len(f.patches())-patches)
	}
	if g := testutil.ToFloat64(fresh.c.Metrics.Held.WithLabelValues("wave")); g != 9 {
		t.Fatalf("fresh controller's held gauge %v, want 9", g)
	}

	// The release.
	src := sourceState(t, cmApp, dataV2)
	src.Annotations = map[string]string{releaseKey: change}
	if err := f.sources.Update(src); err != nil {
		t.Fatal(err)
	}
	if got := f.step(); !reflect.DeepEqual(got, []string{"w01", "w02"}) {
		t.Fatalf("after the release %v, want the second wave [w01 w02]", got)
	}
	if h := f.hold("w01"); h != nil {
		t.Fatalf("the restart kept the hold %+v", h)
	}
	f.step()
	if gauge() != 0 {
		t.Fatalf("held gauge %v after the release, want 0: the rest wait for their waves, not held", gauge())
	}
}

// A new change of a halted source starts its waves over, from the first:
// the workload that failed gets the new data first, nobody else yet.
func TestNewChangeResumesFromTheFirstWave(t *testing.T) {
	f := newFleetHarness(t, 10)
	f.reconcileAll()
	f.sync()
	f.c.Clock = func() time.Time { return reconcileNow.Add(11 * time.Minute) }
	f.reconcileAll()
	f.step()
	f.setSource(map[string]string{"a": "3"})
	if got := f.step(); !reflect.DeepEqual(got, []string{"w00"}) {
		t.Fatalf("a new change restarted %v, want its first wave [w00]", got)
	}
	if g := testutil.ToFloat64(f.c.Metrics.Held.WithLabelValues("wave")); g != 0 {
		t.Fatalf("held gauge %v: the holds of the old change are over", g)
	}
}

// The breaker: a workload restarted its budget of times within the window
// is held, and restarted once its sources have been still for the quiet time.
func TestBreakerHoldsThenRestartsOnce(t *testing.T) {
	u := settle(newHarness(t, nil, nil, nil), fromYAML(t, webDeployment), dataV1)
	var restarts []time.Time
	for i := 5; i > 0; i-- {
		restarts = append(restarts, reconcileNow.Add(-time.Duration(i)*time.Minute))
	}
	prev := &record.LastRestart{At: restarts[4], Result: "complete", Restarts: restarts}
	u = withAnnotations(u, map[string]string{rolloutKey: record.Encode(prev)})
	h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, dataV2)
	rec := &fakeRecorder{}
	h.c.Events = rec
	key := keyOf(deploymentsGVR, u)
	h.c.SourceChanged(cmApp, nil) // the source just changed
	h.c.Clock = func() time.Time { return reconcileNow.Add(10 * time.Second) }
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	got, _ := h.client.Resource(deploymentsGVR).Namespace("shop").Get(context.Background(), "web", metav1.GetOptions{})
	hold, _ := record.ParseHold(got.GetAnnotations()[holdKey])
	if hold == nil || hold.Kind != record.HoldBreaker || !strings.Contains(hold.Cause, "restarted 5 times within 30m0s") {
		t.Fatalf("hold %+v", hold)
	}
	if _, ok, _ := unstructured.NestedString(got.Object, "spec", "template", "metadata", "annotations", timestampKey); ok {
		t.Fatal("restarted past the budget")
	}
	if len(rec.events) != 1 || rec.events[0].reason != "RestartHeld" || rec.events[0].eventtype != corev1.EventTypeWarning {
		t.Fatalf("events %+v", rec.events)
	}
	h.cache(got)
	// Still changing: held.
	h.c.SourceChanged(cmApp, nil)
	h.c.Clock = func() time.Time { return reconcileNow.Add(time.Minute) }
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if n := len(h.patches()); n != 1 {
		t.Fatalf("%d patches while held", n)
	}
	// Still for the quiet time (2m): one restart, the hold removed.
	h.c.Clock = func() time.Time { return reconcileNow.Add(20 * time.Second).Add(3 * time.Minute) }
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	patches := h.patches()
	if len(patches) != 2 || !strings.Contains(string(patches[1].GetPatch()), timestampKey) ||
		!strings.Contains(string(patches[1].GetPatch()), `"`+holdKey+`":null`) {
		t.Fatalf("patches %s", patches[len(patches)-1].GetPatch())
	}
}

// Opt-outs: a change of a source annotated to be ignored, or named by the
// workload's ignore-sources annotation, is recorded without a restart.
func TestOptOutsRecordWithoutRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workload map[string]string
		source   map[string]string
	}{
		{"source annotation", nil, map[string]string{ignoreKey: "true"}},
		{"workload annotation, kind and name", map[string]string{ignoreSrcKey: "secret/x, configmap/app"}, nil},
		{"workload annotation, name", map[string]string{ignoreSrcKey: "app"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := settle(newHarness(t, nil, nil, nil), fromYAML(t, webDeployment), dataV1)
			if tc.workload != nil {
				u = withAnnotations(u, tc.workload)
			}
			h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, nil)
			patch, applied, src := reconcileChange(t, h, u, tc.source)
			if strings.Contains(patch, timestampKey) {
				t.Fatalf("restarted: %s", patch)
			}
			if applied[cmApp.String()] != src.Checksum(testSums, nil) {
				t.Fatalf("applied %v, want the ignored change recorded", applied)
			}
		})
	}
}

// reconcileChange changes source app (to dataV2, with the given source
// annotations) under the workload, reconciles it, and returns its one patch,
// the applied checksums after it, and the source.
func reconcileChange(t *testing.T, h *harness, u *unstructured.Unstructured, annotations map[string]string) (string, map[string]string, *catalog.SourceState) {
	t.Helper()
	src := sourceState(t, cmApp, dataV2)
	src.Annotations = annotations
	if err := h.sources.Update(src); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, u)); err != nil {
		t.Fatal(err)
	}
	patches := h.patches()
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1", len(patches))
	}
	applied := map[string]string{}
	got, err := h.client.Resource(deploymentsGVR).Namespace(u.GetNamespace()).Get(context.Background(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got.GetAnnotations()[appliedKey]), &applied); err != nil {
		t.Fatal(err)
	}
	return string(patches[0].GetPatch()), applied, src
}

// A source riding along with a restart (its change still in its grace
// period) is left out of it when its own waves have no place for the
// workload yet: the restart delivers only what it is for, and the workload
// waits for its wave of the other change.
func TestRideAlongWaitsForItsWave(t *testing.T) {
	f := newFleetHarness(t, 10)
	cmSolo := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "solo"}
	solo := fromYAML(t, strings.Replace(webDeployment, "envFrom: [{configMapRef: {name: app}}]",
		"envFrom: [{configMapRef: {name: app}}, {configMapRef: {name: solo}}]", 1))
	solo.SetName("zz-reader")
	if err := f.sources.Update(sourceState(t, cmSolo, dataV1)); err != nil {
		t.Fatal(err)
	}
	// Recorded with dataV1 of both.
	solo = settle(f.harness, solo, dataV1)
	if _, err := f.client.Resource(deploymentsGVR).Namespace("shop").Create(context.Background(), solo, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cache(solo)
	// app changes now (its grace period opens); solo changed long ago.
	f.c.SourceChanged(cmApp, nil)
	if err := f.sources.Update(sourceState(t, cmSolo, dataV2)); err != nil {
		t.Fatal(err)
	}
	key := keyOf(deploymentsGVR, solo)
	if err := f.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	got := f.get("zz-reader")
	applied := map[string]string{}
	if err := json.Unmarshal([]byte(got.GetAnnotations()[appliedKey]), &applied); err != nil {
		t.Fatal(err)
	}
	if applied[cmSolo.String()] != sourceState(t, cmSolo, dataV2).Checksum(testSums, nil) {
		t.Fatalf("solo not restarted for: %v", applied)
	}
	if applied[cmApp.String()] != sourceState(t, cmApp, dataV1).Checksum(testSums, nil) {
		t.Fatalf("app rode along out of its wave: %v", applied)
	}
	r, err := record.ParseLastRestart(got.GetAnnotations()[rolloutKey])
	if err != nil || len(r.Sources) != 1 || r.Sources[cmSolo.String()] == "" {
		t.Fatalf("record %+v (%v), want only solo delivered", r, err)
	}
}

// The cap on paced rollouts in flight: a wave wider than the cap starts as
// many as it allows; each rollout that ends lets the next one start.
func TestCapOnRolloutsInFlight(t *testing.T) {
	f := newFleetHarness(t, 10)
	cfg := *f.c.Config
	cfg.Waves.MaxInFlight = 1
	f.c.Config, f.c.Rules = &cfg, decision.NewRules(&cfg, testSums)
	f.reconcileAll()
	f.rollOut("w00")
	f.step()
	if got := f.step(); len(got) != 1 || got[0] != "w01" {
		t.Fatalf("second wave under a cap of 1 started %v, want [w01]", got)
	}
	if got := f.step(); len(got) != 0 {
		t.Fatalf("started %v past the cap", got)
	}
	f.rollOut("w01")
	f.step()
	if got := f.step(); len(got) != 1 || got[0] != "w02" {
		t.Fatalf("after w01 completed: %v, want [w02]", got)
	}
}

// An opt-in with a source annotation (Reloader's search and match): a change
// of a source without that annotation is recorded without a restart; one
// of a source with it restarts.
func TestOptInSourceAnnotation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		source  map[string]string
		restart bool
	}{
		{"source not annotated", nil, false},
		{"source annotated false", map[string]string{"example.com/match": "false"}, false},
		{"source annotated true", map[string]string{"example.com/match": "True"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, nil, nil)
			h.cfg.OptIns = []config.OptIn{{Annotation: "example.com/search", Value: "true", SourceAnnotation: "example.com/match"}}
			u := fromYAML(t, strings.Replace(webDeployment, "com.xing.deployment-restart: enabled", `example.com/search: "true"`, 1))
			u = settle(h, u, dataV1)
			if _, err := h.client.Resource(deploymentsGVR).Namespace("shop").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.cache(u)
			patch, applied, src := reconcileChange(t, h, u, tc.source)
			if restarted := strings.Contains(patch, timestampKey); restarted != tc.restart {
				t.Fatalf("restarted %v, want %v: %s", restarted, tc.restart, patch)
			}
			if applied[cmApp.String()] != src.Checksum(testSums, nil) {
				t.Fatalf("applied %v, want the change recorded", applied)
			}
		})
	}
}

// Breaker holds over a shared source end: ten readers of one source (paced:
// more than unpacedUpTo) each used their budget and carry a breaker hold.
// Once the source has been still for the quiet time, every one of them is
// restarted, in waves. A workload's own breaker hold, which its release is
// ending, never keeps it out of its wave; before that was so, each released
// workload saw itself "held elsewhere" and none ever took a place.
func TestBreakerHoldsOverSharedSourceAllEnd(t *testing.T) {
	f := newFleetHarness(t, 10)
	f.usedBudget(reconcileNow, true)
	f.c.SourceChanged(cmApp, nil)
	// Inside the quiet time (2m): every one stays held.
	f.c.Clock = func() time.Time { return reconcileNow.Add(time.Minute) }
	if got := f.step(); len(got) != 0 {
		t.Fatalf("restarted %v inside the quiet time", got)
	}
	// Past it: the waves go out, 1, 2, 4 and the remaining 3, each once the
	// rollouts before it completed.
	f.c.Clock = func() time.Time { return reconcileNow.Add(3 * time.Minute) }
	var waves [][]string
	done := map[string]bool{}
	for round := 0; round < 10 && len(done) < len(f.keys); round++ {
		got := f.step()
		if len(got) == 0 {
			t.Fatalf("round %d: nothing restarted; still waiting: %d of %d", round, len(f.keys)-len(done), len(f.keys))
		}
		for _, name := range got {
			if done[name] {
				t.Fatalf("%s restarted twice", name)
			}
			done[name] = true
			if h := f.hold(name); h != nil {
				t.Fatalf("%s restarted but kept its hold %+v", name, h)
			}
		}
		waves = append(waves, got)
		// Their rollouts complete; the next step records that and opens
		// the next wave.
		f.rollOut(got...)
	}
	if len(done) != len(f.keys) {
		t.Fatalf("%d of %d restarted after the quiet time (waves %v)", len(done), len(f.keys), waves)
	}
	if sizes := func() (s []int) {
		for _, w := range waves {
			s = append(s, len(w))
		}
		return s
	}(); !reflect.DeepEqual(sizes, []int{1, 2, 4, 3}) {
		t.Fatalf("waves %v, want sizes 1, 2, 4, 3", waves)
	}
}

// A wave hold ends without anyone releasing it when the rollout that failed
// completes after all (its pods became ready after the deadline): the
// record's result becomes complete, the change is no longer halted, and the
// held readers go on in their waves, losing their holds.
func TestFailedRolloutThatRecoversEndsTheHold(t *testing.T) {
	f := newFleetHarness(t, 10)
	f.reconcileAll()
	f.sync()
	f.c.Clock = func() time.Time { return reconcileNow.Add(11 * time.Minute) } // past the 10m deadline
	f.reconcileAll()
	if got := f.step(); len(got) != 0 {
		t.Fatalf("restarted %v after the first wave failed", got)
	}
	if h := f.hold("w01"); h == nil || h.Kind != record.HoldWave {
		t.Fatalf("w01 hold %+v, want a wave hold", h)
	}
	// Still failed: decided again, nothing moves.
	if got := f.step(); len(got) != 0 {
		t.Fatalf("restarted %v while the failure stands", got)
	}
	f.rollOut("w00")
	if got := f.step(); len(got) != 0 {
		t.Fatalf("restarted %v in the step that records the recovery", got)
	}
	if r := f.record("w00"); r.Result != "complete" || r.Reason != "Recovered" {
		t.Fatalf("w00 record %+v, want complete (Recovered)", r)
	}
	if !slices.ContainsFunc(f.rec.events, func(e recordedEvent) bool { return e.reason == "RolloutRecovered" }) {
		t.Fatal("no RolloutRecovered event")
	}
	if got := f.step(); !reflect.DeepEqual(got, []string{"w01", "w02"}) {
		t.Fatalf("after the recovery %v, want the second wave [w01 w02]", got)
	}
	for _, name := range []string{"w01", "w02", "w03", "w09"} {
		if h := f.hold(name); h != nil {
			t.Fatalf("%s keeps the hold %+v after the recovery", name, h)
		}
	}
}

// A rollout that ends wakes the readers of its change held for another
// reason, the breaker among them: the breaker's quiet time passes without
// an event, so without the wake they would wait for the wave's periodic
// recheck (30 s) each time a wave could open.
func TestRolloutEndWakesBreakerHeldReaders(t *testing.T) {
	f := newFleetHarness(t, 6)
	f.usedBudget(reconcileNow, true)
	f.sync()
	f.c.Clock = func() time.Time { return reconcileNow.Add(3 * time.Minute) } // past the quiet time
	// Only the first to decide goes: the others still carry their holds.
	first := f.keys[len(f.keys)-1]
	if err := f.c.Reconcile(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.rollOut(first.Name)
	f.cache(f.get(first.Name))
	for f.c.queue.Len() > 0 { // what caching enqueued
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
	if err := f.c.Reconcile(context.Background(), first); err != nil { // records the completion, and wakes
		t.Fatal(err)
	}
	woken := map[catalog.WorkloadKey]bool{}
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		woken[key] = true
		f.c.queue.Done(key)
	}
	for _, k := range f.keys[:len(f.keys)-1] {
		if !woken[k] {
			t.Errorf("%s, held by the breaker and pending, not woken when the rollout ended (woken: %v)", k.Name, woken)
		}
	}
}

// usedBudget gives every workload of the harness, in the API server, a
// record of five restarts in the five minutes before now (the example
// config's breaker budget) and, when held, a breaker hold.
func (f *fleetHarness) usedBudget(now time.Time, held bool) {
	f.t.Helper()
	var restarts []time.Time
	for i := 5; i > 0; i-- {
		restarts = append(restarts, now.Add(-time.Duration(i)*time.Minute))
	}
	ann := map[string]string{rolloutKey: record.Encode(&record.LastRestart{At: restarts[4], Result: "complete", Restarts: restarts})}
	if held {
		ann[holdKey] = record.Encode(&record.Hold{Kind: record.HoldBreaker, Cause: "restarted 5 times", Since: now.Add(-time.Minute)})
	}
	for _, k := range f.keys {
		u := withAnnotations(f.get(k.Name), ann)
		if _, err := f.client.Resource(deploymentsGVR).Namespace("shop").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}
