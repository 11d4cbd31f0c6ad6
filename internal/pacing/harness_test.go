package pacing

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/decision/decisiontest"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

var (
	cmApp          = catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
	dataV1         = map[string]string{"a": "1"}
	dataV2         = map[string]string{"a": "2"}
	t0             = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

const (
	releaseKey = "release"
	ignoreKey  = "ignore"
)

// fakeCatalog is the caches over maps: what the fleet reads of them.
type fakeCatalog struct {
	sources   decision.Sources
	workloads map[catalog.WorkloadKey]*catalog.WorkloadState
	reads     int
}

func (c *fakeCatalog) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	s, ok := c.sources[id]
	return s, ok
}

func (c *fakeCatalog) Workload(key catalog.WorkloadKey) (*catalog.WorkloadState, bool) {
	c.reads++
	w, ok := c.workloads[key]
	return w, ok
}

func (c *fakeCatalog) WorkloadsReading(id catalog.SourceID) []catalog.WorkloadKey {
	var keys []catalog.WorkloadKey
	for k, w := range c.workloads {
		if slices.ContainsFunc(w.References, func(r catalog.Reference) bool { return r.ID == id }) {
			keys = append(keys, k)
		}
	}
	return keys
}

func (c *fakeCatalog) NamespaceLabels(string) labels.Labels { return nil }

func (c *fakeCatalog) InFlight() []catalog.WorkloadKey {
	var keys []catalog.WorkloadKey
	for k, w := range c.workloads {
		if w.InFlight {
			keys = append(keys, k)
		}
	}
	return keys
}

// harness is n opted-in workloads w00..wNN reading every key of cmApp,
// applied at dataV1; the source holds dataV2. Waves of 1, 2, 4, ... over
// more than 3 readers.
type harness struct {
	t    testing.TB
	cat  *fakeCatalog
	f    *State
	now  time.Time
	keys []catalog.WorkloadKey
}

func rules() decision.Rules {
	return decision.Rules{Annotations: config.Annotations{Release: releaseKey, Ignore: ignoreKey},
		Waves: config.Waves{UnpacedUpTo: 3, FirstWave: 1, Growth: 2, MaxInFlight: 100}, Sums: decisiontest.Sums}
}

func newHarness(t testing.TB, n int) *harness {
	t.Helper()
	h := &harness{t: t, now: t0, cat: &fakeCatalog{sources: decision.Sources{}, workloads: map[catalog.WorkloadKey]*catalog.WorkloadState{}}}
	h.f = New(Deps{Catalog: h.cat, Rules: rules(), Started: t0})
	h.cat.sources[cmApp] = decisiontest.SourceState(t, cmApp, dataV2)
	applied := decisiontest.Annotation(t, map[string]string{cmApp.String(): decisiontest.V1(decisiontest.SourceState(t, cmApp, dataV1), nil)})
	for i := range n {
		key := catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "shop", Name: fmt.Sprintf("w%02d", i)}
		h.keys = append(h.keys, key)
		h.cat.workloads[key] = &catalog.WorkloadState{OptedIn: true, HasApplied: true, Applied: applied,
			TemplateHash: "t", AppliedTemplateHash: "t", References: []catalog.Reference{{ID: cmApp}}}
	}
	return h
}

// change is the source's current change.
func (h *harness) change() string { return h.cat.sources[cmApp].Change(decisiontest.Sums) }

// update replaces the cached state of the i-th workload with what edit
// makes of a copy, and tells the fleet, as the watcher does.
func (h *harness) update(i int, edit func(w *catalog.WorkloadState)) {
	key := h.keys[i]
	w := h.cat.workloads[key].DeepCopyObject().(*catalog.WorkloadState)
	edit(w)
	h.cat.workloads[key] = w
	h.f.WorkloadCached(key)
}

// restarted caches the i-th workload restarted for the current change: the
// record, in flight, and the new applied checksum.
func (h *harness) restarted(i int) {
	rec := &record.LastRestart{At: h.now, Sources: map[string]string{cmApp.String(): h.change()}}
	applied := decisiontest.Annotation(h.t, map[string]string{cmApp.String(): decisiontest.V1(h.cat.sources[cmApp], nil)})
	h.update(i, func(w *catalog.WorkloadState) {
		w.LastRestart, w.InFlight, w.Applied = record.Encode(rec), true, applied
	})
}

// ended caches the result of the i-th workload's rollout.
func (h *harness) ended(i int, result rollout.Result, reason string) {
	h.update(i, func(w *catalog.WorkloadState) {
		rec, err := record.ParseLastRestart(w.LastRestart)
		if err != nil || rec == nil {
			h.t.Fatalf("w%02d: no record: %v", i, err)
		}
		rec.Result, rec.Reason = result, reason
		w.LastRestart, w.InFlight = record.Encode(rec), false
	})
}

// reserve is the decision of the i-th workload restarting it: under the
// lock, its facts are gathered and its record reserved.
func (h *harness) reserve(i int) {
	l := h.f.Lock()
	defer l.Unlock()
	l.Facts(h.keys[i], nil, []catalog.SourceID{cmApp}, decision.Sources{cmApp: h.cat.sources[cmApp]}, h.now)
	l.Note(h.keys[i], decision.Verdict{Action: decision.Restart, At: h.now,
		LastRestart: &record.LastRestart{At: h.now, Sources: map[string]string{cmApp.String(): h.change()}}})
}

// checkMemo compares, for the deciding workload absent and for each reader
// as the deciding one, the memoized wave state of cmApp with a full scan of
// its readers: the memo must be a cache, never a decision of its own.
func (h *harness) checkMemo(step string) {
	h.t.Helper()
	src, ok := h.cat.Source(cmApp)
	if !ok {
		h.t.Fatal("no source")
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	released := src.Annotations[releaseKey] == h.change()
	for _, self := range append([]catalog.WorkloadKey{{}}, h.keys...) {
		gotNames, got := h.f.waveState(cmApp, src, self, h.now)
		wantNames, readers := h.f.readers(cmApp, src, h.change(), h.cat.WorkloadsReading(cmApp), self, h.now)
		want := decision.EvaluateWaves(rules().Waves, readers, released)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotNames, wantNames) {
			h.t.Fatalf("%s, deciding %q: memoized\n%+v\n%v\nscanned\n%+v\n%v", step, self.Name, got, gotNames, want, wantNames)
		}
	}
}
