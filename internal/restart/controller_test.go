package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	cronjobsGVR    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}

	reconcileNow = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
)

const stampAtNow = "2030-01-02T03:04:05.000000006Z"

const webDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  resourceVersion: "42"
  annotations: {com.xing.deployment-restart: enabled, owner: team-a}
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: shop/web:1
        envFrom: [{configMapRef: {name: app}}]
`

const nightlyCronJob = `
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
  namespace: shop
  resourceVersion: "7"
  annotations: {com.xing.deployment-restart: enabled}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: job
            image: shop/job:1
            envFrom: [{configMapRef: {name: app}}]
`

type harness struct {
	t         testing.TB
	cfg       *config.Config
	c         *Controller
	client    *fake.FakeDynamicClient
	sources   cache.Indexer
	workloads map[schema.GroupVersionResource]cache.Indexer
	// inAPIOnly are sources the API server has and the cache does not yet.
	inAPIOnly   map[catalog.SourceID]bool
	existsCalls int
}

func (h *harness) exists(_ context.Context, id catalog.SourceID) (bool, error) {
	h.existsCalls++
	if _, cached := h.c.Catalog.Source(id); cached {
		return true, nil
	}
	return h.inAPIOnly[id], nil
}

// newHarness builds a controller over real catalog stores and a fake dynamic
// client. inAPI objects are served by the fake API server; cached objects are
// reduced into the informer stores.
func newHarness(t testing.TB, inAPI []*unstructured.Unstructured, cached []*unstructured.Unstructured, sourceData map[string]string) *harness {
	t.Helper()
	cfg := exampleConfig(t)
	cfg.Settings.GracePeriod = 10 * time.Second
	// CronJobs here restart by their pod template's annotation, a kind whose
	// template lies deeper than spec.template; strategy_test.go has them
	// start Jobs (runNow), as examples/config.yaml configures them.
	for i, w := range cfg.Workloads {
		if w.GVR == cronjobsGVR {
			cfg.Workloads[i] = config.WorkloadKind{GVR: cronjobsGVR, PodTemplatePath: refs.MustParsePath("spec.jobTemplate.spec.template")}
		}
	}

	cat := catalog.New()
	h := &harness{t: t, cfg: cfg, sources: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		workloads: map[schema.GroupVersionResource]cache.Indexer{}, inAPIOnly: map[catalog.SourceID]bool{}}
	cat.AddSourceStore("configmap", h.sources)
	for _, w := range cfg.Workloads {
		store := cat.IndexedStore(w.GVR, cache.NewIndexer(cache.MetaNamespaceKeyFunc, catalog.WorkloadIndexers()))
		h.workloads[w.GVR] = store
		cat.AddWorkloadStore(w.GVR, store)
	}
	if sourceData != nil {
		h.setSource(sourceData)
	}
	objs := make([]runtime.Object, len(inAPI))
	for i, u := range inAPI {
		objs[i] = u.DeepCopy()
	}
	h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), objs...)
	for _, u := range cached {
		h.cache(u)
	}

	h.c = newController(t, cfg, cat, h.client, h.exists)
	return h
}

func (h *harness) setSource(data map[string]string) *catalog.SourceState {
	h.t.Helper()
	state := sourceState(h.t, cmApp, data)
	if err := h.sources.Update(state); err != nil {
		h.t.Fatal(err)
	}
	return state
}

func (h *harness) gvrOf(u *unstructured.Unstructured) schema.GroupVersionResource {
	if u.GetKind() == "CronJob" {
		return cronjobsGVR
	}
	return deploymentsGVR
}

func (h *harness) kindOf(gvr schema.GroupVersionResource) config.WorkloadKind {
	for _, w := range h.cfg.Workloads {
		if w.GVR == gvr {
			return w
		}
	}
	h.t.Fatalf("no workload kind %s", gvr)
	return config.WorkloadKind{}
}

// reduce reduces a workload object as its informer does.
func (h *harness) reduce(u *unstructured.Unstructured) *catalog.WorkloadState {
	h.t.Helper()
	out, err := catalog.ReduceWorkload(h.kindOf(h.gvrOf(u)), h.cfg)(u.DeepCopy())
	if err != nil {
		h.t.Fatal(err)
	}
	return out.(*catalog.WorkloadState)
}

func (h *harness) cache(u *unstructured.Unstructured) {
	h.t.Helper()
	if err := h.workloads[h.gvrOf(u)].Update(h.reduce(u)); err != nil {
		h.t.Fatal(err)
	}
	// As the informer does (through the watcher's handler), once stored.
	if h.c != nil {
		h.c.WorkloadChanged(keyOf(h.gvrOf(u), u))
	}
}

// settle returns a copy of u annotated as if its pods were started with the
// given source data: applied checksums and the current template hash.
func settle(h *harness, u *unstructured.Unstructured, data map[string]string) *unstructured.Unstructured {
	h.t.Helper()
	out := u.DeepCopy()
	w := h.reduce(out)
	applied := map[string]string{}
	for _, r := range w.References {
		applied[r.ID.String()] = sourceState(h.t, r.ID, data).Checksum(testSums, r.Keys)
	}
	ann := out.GetAnnotations()
	ann[appliedKey] = annotation(h.t, applied)
	ann[templateHashKey] = w.TemplateHash
	out.SetAnnotations(ann)
	return out
}

func keyOf(gvr schema.GroupVersionResource, u *unstructured.Unstructured) catalog.WorkloadKey {
	return catalog.WorkloadKey{Resource: gvr, Namespace: u.GetNamespace(), Name: u.GetName()}
}

func (h *harness) patches() []k8stesting.PatchAction {
	var out []k8stesting.PatchAction
	for _, a := range h.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, p)
		}
	}
	return out
}

// patchBody is the exact patch the controller must send, but for the
// rollout record a restart carries too (withoutRecord; fleet_test.go checks
// records).
func patchBody(rv, applied, templateHash, templatePath string, restart bool) string {
	body := `{"metadata":{"annotations":{"` + appliedKey + `":"` + strings.ReplaceAll(applied, `"`, `\"`) + `",` +
		`"` + templateHashKey + `":"` + templateHash + `"},"resourceVersion":"` + rv + `"}`
	if restart {
		stamp := `{"metadata":{"annotations":{"` + timestampKey + `":"` + stampAtNow + `"}}}`
		for _, f := range reverse(strings.Split(templatePath, ".")) {
			stamp = `{"` + f + `":` + stamp + `}`
		}
		body += `,` + stamp[1:len(stamp)-1]
	}
	return body + `}`
}

// withoutRecord is a patch without its rollout record annotation, encoded
// as the controller encodes patches (map keys sorted). A restart must carry
// the record; any other patch must not.
func withoutRecord(t testing.TB, patch []byte) string {
	t.Helper()
	var m map[string]interface{}
	if err := json.Unmarshal(patch, &m); err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	restart := strings.Contains(string(patch), timestampKey)
	if meta, ok := m["metadata"].(map[string]interface{}); ok {
		if ann, ok := meta["annotations"].(map[string]interface{}); ok {
			if _, has := ann[rolloutKey]; has != restart {
				t.Errorf("patch %s: rollout record present %v, restart %v", patch, has, restart)
			}
			delete(ann, rolloutKey)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

var (
	dataV1 = map[string]string{"a": "1"}
	dataV2 = map[string]string{"a": "2"}
)

func TestReconcile(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("the object has been modified"))
	internal := apierrors.NewInternalError(errors.New("etcd is sad"))

	type row struct {
		name       string
		workload   string // fixture
		annotate   func(h *harness, u *unstructured.Unstructured) *unstructured.Unstructured
		inAPI      bool // the API server has the object
		cached     bool // the informer has the object
		source     map[string]string
		reactorErr error

		wantErr     func(error) bool // nil: no error expected
		wantPatch   bool
		wantRestart bool
	}
	settledV1 := func(h *harness, u *unstructured.Unstructured) *unstructured.Unstructured { return settle(h, u, dataV1) }
	rows := []row{
		{name: "source data changed: one restart patch", workload: webDeployment, annotate: settledV1,
			inAPI: true, cached: true, source: dataV2, wantPatch: true, wantRestart: true},
		{name: "source data changed, CronJob: timestamp under spec.jobTemplate.spec.template", workload: nightlyCronJob, annotate: settledV1,
			inAPI: true, cached: true, source: dataV2, wantPatch: true, wantRestart: true},
		{name: "nothing changed: no API call", workload: webDeployment, annotate: settledV1,
			inAPI: true, cached: true, source: dataV1},
		{name: "new workload: checksums recorded, no restart", workload: webDeployment,
			inAPI: true, cached: true, source: dataV2, wantPatch: true},
		{name: "not opted in: no API call", workload: webDeployment,
			annotate: func(h *harness, u *unstructured.Unstructured) *unstructured.Unstructured {
				u = settle(h, u, dataV1)
				ann := u.GetAnnotations()
				ann[optInKey] = "disabled"
				u.SetAnnotations(ann)
				return u
			},
			inAPI: true, cached: true, source: dataV2},
		{name: "not cached: no API call", workload: webDeployment, annotate: settledV1,
			inAPI: true, source: dataV2},
		{name: "no pod template: no API call", workload: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, resourceVersion: "42", annotations: {com.xing.deployment-restart: enabled}}
spec: {replicas: 1}
`, inAPI: true, cached: true, source: dataV2},
		{name: "deleted from the API server: NotFound is not an error", workload: webDeployment, annotate: settledV1,
			cached: true, source: dataV2, wantPatch: true, wantRestart: true},
		{name: "conflict: returned for the queue to retry", workload: webDeployment, annotate: settledV1,
			inAPI: true, cached: true, source: dataV2, reactorErr: conflict,
			wantErr: apierrors.IsConflict, wantPatch: true, wantRestart: true},
		{name: "server error: returned for the queue to retry", workload: webDeployment, annotate: settledV1,
			inAPI: true, cached: true, source: dataV2, reactorErr: internal,
			wantErr: apierrors.IsInternalError, wantPatch: true, wantRestart: true},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			// The harness is built twice: once to annotate the fixture with
			// checksums and template hash, once with the annotated fixture.
			u := fromYAML(t, r.workload)
			if r.annotate != nil {
				u = r.annotate(newHarness(t, nil, nil, nil), u)
			}
			var inAPI, cached []*unstructured.Unstructured
			if r.inAPI {
				inAPI = append(inAPI, u)
			}
			if r.cached {
				cached = append(cached, u)
			}
			h := newHarness(t, inAPI, cached, r.source)
			gvr := h.gvrOf(u)
			if r.reactorErr != nil {
				h.client.PrependReactor("patch", gvr.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, r.reactorErr
				})
			}

			err := h.c.Reconcile(context.Background(), keyOf(gvr, u))
			switch {
			case r.wantErr == nil && err != nil:
				t.Fatalf("Reconcile: %v", err)
			case r.wantErr != nil && (err == nil || !r.wantErr(err)):
				t.Fatalf("Reconcile error %v, want a different one", err)
			}

			actions := h.client.Actions()
			if !r.wantPatch {
				if len(actions) != 0 {
					t.Fatalf("API actions %v, want none", actions)
				}
				return
			}
			if len(actions) != 1 {
				t.Fatalf("API actions %v, want one patch", actions)
			}
			p, ok := actions[0].(k8stesting.PatchActionImpl)
			if !ok {
				t.Fatalf("action %T %v, want a patch", actions[0], actions[0])
			}
			if p.GetResource() != gvr || p.GetNamespace() != "shop" || p.GetName() != u.GetName() ||
				p.GetPatchType() != types.MergePatchType || p.GetSubresource() != "" {
				t.Errorf("patch of %v %s/%s type %s subresource %q", p.GetResource(), p.GetNamespace(), p.GetName(), p.GetPatchType(), p.GetSubresource())
			}
			if p.PatchOptions.FieldManager != "restart-controller" {
				t.Errorf("field manager %q", p.PatchOptions.FieldManager)
			}
			w := h.reduce(u)
			applied := annotation(t, map[string]string{cmApp.String(): sourceState(t, cmApp, r.source).Checksum(testSums, nil)})
			path := strings.Join(h.c.templateFields[gvr], ".")
			want := patchBody(u.GetResourceVersion(), applied, w.TemplateHash, path, r.wantRestart)
			if withoutRecord(t, p.GetPatch()) != want {
				t.Errorf("patch body:\n got %s\nwant %s", p.GetPatch(), want)
			}
		})
	}
}

// TestReconcileRestartSettles follows a restart through the fake API server:
// the patched object, once back in the cache, needs nothing more, and the
// patch kept everything it did not name.
func TestReconcileRestartSettles(t *testing.T) {
	for _, fixture := range []string{webDeployment, nightlyCronJob} {
		u := settle(newHarness(t, nil, nil, nil), fromYAML(t, fixture), dataV1)
		h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, dataV2)
		gvr := h.gvrOf(u)
		key := keyOf(gvr, u)
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		if n := len(h.patches()); n != 1 {
			t.Fatalf("%s: %d patches, want 1", u.GetKind(), n)
		}
		patched, err := h.client.Resource(gvr).Namespace("shop").Get(context.Background(), u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fields := append(append([]string(nil), h.c.templateFields[gvr]...), "metadata", "annotations", timestampKey)
		if stamp, _, _ := unstructured.NestedString(patched.Object, fields...); stamp != stampAtNow {
			t.Errorf("%s: restart timestamp %q, want %q", u.GetKind(), stamp, stampAtNow)
		}
		if patched.GetAnnotations()[optInKey] != "enabled" {
			t.Errorf("%s: patch dropped the opt-in annotation: %v", u.GetKind(), patched.GetAnnotations())
		}
		containers, _, _ := unstructured.NestedSlice(patched.Object, append(h.c.templateFields[gvr], "spec", "containers")...)
		if len(containers) != 1 {
			t.Errorf("%s: containers lost: %v", u.GetKind(), containers)
		}
		before, after := h.reduce(u), h.reduce(patched)
		if before.TemplateHash != after.TemplateHash {
			t.Errorf("%s: our own restart changed the template hash", u.GetKind())
		}

		// The informer delivers the patched object, its rollout done. The
		// change reached one workload (unpaced): nothing waits on the
		// rollout's end, so it is reported but not written. The record says
		// so, and the status shows the end to every later decision.
		if err := unstructured.SetNestedMap(patched.Object, map[string]interface{}{
			"replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(2),
		}, "status"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.client.Resource(gvr).Namespace("shop").Update(context.Background(), patched, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.cache(patched)
		events := &fakeRecorder{}
		h.c.Events = events
		h.c.Clock = func() time.Time { return reconcileNow.Add(time.Minute) }
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		if n := len(h.patches()); n != 1 {
			t.Fatalf("%s: %d patches, want the restart alone: an unpaced rollout's end is not written", u.GetKind(), n)
		}
		done, err := h.client.Resource(gvr).Namespace("shop").Get(context.Background(), u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := record.ParseLastRestart(done.GetAnnotations()[rolloutKey])
		if err != nil || rec == nil || !rec.Unpaced || !rec.InFlight() {
			t.Fatalf("%s: rollout record %+v (%v), want unpaced without a result", u.GetKind(), rec, err)
		}
		if got := rec.Outcome(decision.RolloutStatus(h.reduce(done)).Phase); got == rollout.ResultPending || got == rollout.ResultFailed {
			t.Errorf("%s: outcome from the status %q, want it ended", u.GetKind(), got)
		}
		if u.GetKind() == "Deployment" {
			if len(events.events) != 1 || events.events[0].reason != "RolloutComplete" {
				t.Errorf("%s: events %+v, want one RolloutComplete", u.GetKind(), events.events)
			}
			if n := testutil.ToFloat64(h.c.Metrics.Rollouts.WithLabelValues("complete")); n != 1 {
				t.Errorf("%s: rollouts complete %v, want 1", u.GetKind(), n)
			}
		}

		// Nothing more to do, even much later.
		h.cache(done)
		h.c.Clock = func() time.Time { return reconcileNow.Add(time.Hour) }
		actions := len(h.client.Actions())
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		if got := h.client.Actions()[actions:]; len(got) != 0 {
			t.Errorf("%s: settled workload reconciled into %v", u.GetKind(), got)
		}
		if u.GetKind() == "Deployment" && len(events.events) != 1 {
			t.Errorf("%s: the end reported again: %+v", u.GetKind(), events.events)
		}
	}
}

// TestReconcileGracePeriod: a change reported by the watcher waits for its
// grace period; further changes inside it merge; one restart follows.
func TestReconcileGracePeriod(t *testing.T) {
	u := settle(newHarness(t, nil, nil, nil), fromYAML(t, webDeployment), dataV1)
	h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, dataV1)
	key := keyOf(deploymentsGVR, u)
	now := reconcileNow
	h.c.Clock = func() time.Time { return now }
	reconcile := func() {
		t.Helper()
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}

	h.setSource(dataV2)
	h.c.SourceChanged(cmApp, nil) // window until now+10s
	reconcile()
	now = now.Add(4 * time.Second)
	h.setSource(map[string]string{"a": "3"})
	h.c.SourceChanged(cmApp, nil) // merged: still due at +10s
	reconcile()
	if n := len(h.client.Actions()); n != 0 {
		t.Fatalf("%d API actions inside the grace period", n)
	}
	if g, open := h.c.grace.Of([]catalog.Reference{{ID: cmApp}}, now)[cmApp]; !open || !g.Ends.Equal(reconcileNow.Add(10*time.Second)) {
		t.Fatalf("grace period ends %v (open %v), want +10s", g.Ends, open)
	}

	now = reconcileNow.Add(10 * time.Second)
	reconcile()
	patches := h.patches()
	if len(patches) != 1 {
		t.Fatalf("%d patches after the grace period, want 1", len(patches))
	}
	applied := annotation(t, map[string]string{cmApp.String(): sourceState(t, cmApp, map[string]string{"a": "3"}).Checksum(testSums, nil)})
	want := patchBody("42", applied, h.reduce(u).TemplateHash, "spec.template", true)
	want = strings.ReplaceAll(want, stampAtNow, now.UTC().Format(time.RFC3339Nano))
	if withoutRecord(t, patches[0].GetPatch()) != want {
		t.Errorf("patch body:\n got %s\nwant %s", patches[0].GetPatch(), want)
	}
}

func TestNewRejectsFanningOutTemplatePath(t *testing.T) {
	cfg := exampleConfig(t)
	cfg.Workloads = append(cfg.Workloads, config.WorkloadKind{GVR: cronjobsGVR, PodTemplatePath: refs.MustParsePath("spec.templates[*]")})
	if _, err := New(Deps{Config: cfg, Metrics: metrics.New(func() (int, int) { return 0, 0 })}); err == nil {
		t.Error("New accepted a pod template path with [*]")
	}
}

// The cache of sources can lag behind the cache of workloads. A source that
// exists but is not cached yet must not be recorded as absent: that would
// turn its "appearance" into a restart (optional) or swallow its next change
// (required). The absence is confirmed with the API server first.
func TestReconcileConfirmsAbsenceWithTheAPI(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inAPI     bool
		wantErr   error
		wantPatch bool
	}{
		{"exists in the API, not cached yet: decide again later", true, errCacheBehind, false},
		{"absent in the API too: recorded as absent", false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fromYAML(t, webDeployment)
			h := newHarness(t, []*unstructured.Unstructured{w}, []*unstructured.Unstructured{w}, nil)
			h.inAPIOnly[cmApp] = tc.inAPI
			err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, w))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if h.existsCalls == 0 {
				t.Fatal("absence was not confirmed with the API")
			}
			if got := len(h.patches()) > 0; got != tc.wantPatch {
				t.Fatalf("patched: %v, want %v", got, tc.wantPatch)
			}
		})
	}
}

type recordedEvent struct{ eventtype, reason, note string }

type fakeRecorder struct{ events []recordedEvent }

func (f *fakeRecorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _ string, note string, args ...interface{}) {
	f.events = append(f.events, recordedEvent{eventtype, reason, fmt.Sprintf(note, args...)})
}

// Errors are handled in the queue, never dropped: a persistent one is retried
// and reported as an Event on the workload (first time, then every tenth), an
// error matching --ignored-errors is warned about and forgotten.
func TestProcessNextErrorHandling(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web",
		errors.New("webhook says no"))
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web",
		errors.New("the object has been modified"))
	for _, tc := range []struct {
		name        string
		err         error
		ignored     []string
		wantEvents  int
		wantQueued  bool
		wantIgnored float64
	}{
		{"persistent error: retried and reported", forbidden, nil, 1, true, 0},
		{"ignored by configuration: forgotten", forbidden, []string{"webhook says no"}, 0, false, 1},
		{"a conflict is never ignored, whatever the patterns", conflict, []string{"has been modified"}, 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fromYAML(t, webDeployment)
			h := newHarness(t, nil, nil, dataV2)
			settled := settle(h, w, dataV1)
			h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), settled.DeepCopy())
			h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
			h.cache(settled)
			h.client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			rec := &fakeRecorder{}
			h.c.Events = rec
			cfg := *h.cfg
			cfg.Settings.IgnoredErrors = tc.ignored
			h.c.Config = &cfg

			key := keyOf(deploymentsGVR, w)
			h.c.queue.Add(key)
			if !h.c.processNext(context.Background(), context.Background()) {
				t.Fatal("queue shut down")
			}
			if len(rec.events) != tc.wantEvents {
				t.Fatalf("events %+v, want %d", rec.events, tc.wantEvents)
			}
			if tc.wantEvents > 0 && (rec.events[0].eventtype != corev1.EventTypeWarning || !strings.Contains(rec.events[0].note, "webhook says no")) {
				t.Fatalf("event %+v", rec.events[0])
			}
			if queued := h.c.queue.NumRequeues(key) > 0; queued != tc.wantQueued {
				t.Fatalf("requeued with backoff: %v, want %v", queued, tc.wantQueued)
			}
			if got := testutil.ToFloat64(h.c.Metrics.IgnoredErrors); got != tc.wantIgnored {
				t.Fatalf("ignored errors metric %v, want %v", got, tc.wantIgnored)
			}
		})
	}
}

// On SIGTERM, Run stops taking items at once, even queued ones, and lets the
// reconcile under way finish its patch.
func TestRunStopsTakingWorkAndFinishesWhatIsUnderWay(t *testing.T) {
	h := newHarness(t, nil, nil, dataV2)
	var settled []runtime.Object
	var keys []catalog.WorkloadKey
	for _, name := range []string{"a", "b", "c"} {
		w := fromYAML(t, webDeployment)
		w.SetName(name)
		s := settle(h, w, dataV1) // recorded with old data: a restart is due
		settled = append(settled, s.DeepCopy())
		h.cache(s)
		keys = append(keys, keyOf(deploymentsGVR, w))
	}
	h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), settled...)
	h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
	inFlight, release := make(chan struct{}), make(chan struct{})
	var patches atomic.Int32
	h.client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) == 1 {
			close(inFlight)
			<-release
		}
		return false, nil, nil // the tracker applies the patch
	})
	for _, k := range keys {
		h.c.queue.Add(k)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.c.Run(ctx, context.Background(), 1, time.Minute)
	}()
	select {
	case <-inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile started")
	}
	cancel() // SIGTERM while the first patch is under way and two keys wait
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the reconcile under way finished")
	}
	if n := patches.Load(); n != 1 {
		t.Fatalf("%d patches; want 1: the one under way finishes, queued work is not taken", n)
	}
	if got := testutil.ToFloat64(h.c.Metrics.Restarts); got != 1 {
		t.Fatalf("restarts metric %v, want 1 (the patch under way landed)", got)
	}
}

// Sweep runs on every replica, apart from Run: a standby observes changes
// too, and without it its grace-window bookkeeping would grow forever.
func TestSweepForgetsEndedWindowsWithoutRun(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	h.c.Config.Settings.CheckPeriod = 10 * time.Millisecond
	h.c.grace.Observe(cmApp, reconcileNow, false, nil)
	h.c.Clock = func() time.Time { return reconcileNow.Add(time.Hour) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.c.Sweep(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, open := h.c.grace.Opened(cmApp); !open {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Sweep never forgot a window that ended an hour ago")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// What a reconcile reports: Events that `kubectl describe` shows, naming the
// sources and the keys read, never a value; in a dry run the same decisions,
// said as "would", and nothing patched.
func TestReconcileReports(t *testing.T) {
	for _, tc := range []struct {
		name         string
		dryRun       bool
		settled      bool // recorded before (else first sight)
		wantPatch    bool
		wantReason   string
		wantNote     string
		wantRestarts float64
	}{
		{"restart", false, true, true, "Restarted", "Restarted to pick up changed data: configmap/shop/app (all keys)", 1},
		{"dry run restart", true, true, false, "WouldRestart", "Would restart to pick up changed data: configmap/shop/app (all keys)", 1},
		{"first sight", false, false, true, "RecordedChecksums", "Recorded the checksums of the data its pods read from 1 source(s)", 0},
		{"dry run first sight", true, false, false, "WouldRecordChecksums", "Would record the checksums of the data its pods read from 1 source(s)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fromYAML(t, webDeployment)
			h := newHarness(t, nil, nil, dataV2)
			if tc.settled {
				w = settle(h, w, dataV1)
			}
			h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), w.DeepCopy())
			h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
			h.cache(w)
			rec := &fakeRecorder{}
			h.c.Events = rec
			h.c.Config.Settings.DryRun = tc.dryRun
			key := keyOf(deploymentsGVR, w)
			for i := 0; i < 2; i++ { // in a dry run nothing changes, so the second decides the same
				if err := h.c.Reconcile(context.Background(), key); err != nil {
					t.Fatal(err)
				}
				if tc.wantPatch {
					break // the patched object is not re-cached here
				}
			}
			if got := len(h.patches()) > 0; got != tc.wantPatch {
				t.Fatalf("patched: %v, want %v", got, tc.wantPatch)
			}
			if len(rec.events) != 1 {
				t.Fatalf("events %+v, want exactly one", rec.events)
			}
			e := rec.events[0]
			if e.reason != tc.wantReason || !strings.HasPrefix(e.note, tc.wantNote) || e.eventtype != corev1.EventTypeNormal {
				t.Fatalf("event %+v, want %s %q", e, tc.wantReason, tc.wantNote)
			}
			if strings.Contains(e.note, `"2"`) || strings.Contains(e.note, "a: 2") {
				t.Fatalf("event shows a value: %q", e.note)
			}
			if got := testutil.ToFloat64(h.c.Metrics.Restarts); got != tc.wantRestarts {
				t.Fatalf("restarts metric %v, want %v", got, tc.wantRestarts)
			}
		})
	}
}

// withAnnotations returns a copy of u with annotations set.
func withAnnotations(u *unstructured.Unstructured, set map[string]string) *unstructured.Unstructured {
	out := u.DeepCopy()
	ann := out.GetAnnotations()
	for k, v := range set {
		ann[k] = v
	}
	out.SetAnnotations(ann)
	return out
}

// A workload recorded by the release before versioned checksums (bare
// 16-hex version-1 values) is re-recorded in the current version once,
// silently, when its data did not change; a change still restarts it.
func TestReconcileUpgradeFromVersion1Checksums(t *testing.T) {
	u := fromYAML(t, webDeployment)
	w := newHarness(t, nil, nil, nil).reduce(u)
	old := v1(sourceState(t, cmApp, dataV1), nil)
	if version, _, _ := checksum.Parse(old); version != 1 || strings.HasPrefix(old, "v") {
		t.Fatalf("fixture %q is not a version-1 checksum", old)
	}
	recorded := withAnnotations(u, map[string]string{
		appliedKey:      annotation(t, map[string]string{cmApp.String(): old}),
		templateHashKey: w.TemplateHash, // the previous release's format: the bare hash
	})
	for _, tc := range []struct {
		name    string
		data    map[string]string
		restart bool
	}{
		{"unchanged data: re-recorded, no restart", dataV1, false},
		{"changed data: restart", dataV2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, []*unstructured.Unstructured{recorded}, []*unstructured.Unstructured{recorded}, tc.data)
			key := keyOf(deploymentsGVR, recorded)
			if err := h.c.Reconcile(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			patches := h.patches()
			if len(patches) != 1 {
				t.Fatalf("%d patches, want 1", len(patches))
			}
			now := sourceState(t, cmApp, tc.data).Checksum(testSums, nil)
			if !strings.HasPrefix(now, "v3."+testSums.KeyID()+":") {
				t.Fatalf("current checksum %q is not version 3 under the test key", now)
			}
			want := patchBody("42", annotation(t, map[string]string{cmApp.String(): now}), w.TemplateHash, "spec.template", tc.restart)
			if got := withoutRecord(t, patches[0].GetPatch()); got != want {
				t.Errorf("patch body:\n got %s\nwant %s", got, want)
			}
			// Once written, nothing more: the re-record happens once.
			patched, err := h.client.Resource(deploymentsGVR).Namespace("shop").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h.cache(patched)
			if err := h.c.Reconcile(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			if n := len(h.patches()); n != 1 {
				t.Errorf("%d patches after the re-record settled, want 1", n)
			}
		})
	}
	// The exact bytes of a re-record, spelled out once.
	h := newHarness(t, []*unstructured.Unstructured{recorded}, []*unstructured.Unstructured{recorded}, dataV1)
	if err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, recorded)); err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{` +
		`"com.xing.deployment-restart.applied-config-checksums":"{\"configmap/shop/app\":\"` + sourceState(t, cmApp, dataV1).Checksum(testSums, nil) + `\"}",` +
		`"com.xing.deployment-restart.applied-template-hash":"` + w.TemplateHash + `"},"resourceVersion":"42"}}`
	if got := withoutRecord(t, h.patches()[0].GetPatch()); got != want {
		t.Errorf("re-record patch:\n got %s\nwant %s", got, want)
	}
}

// helm upgrade: the source was updated (resourceVersion 99), then the
// template changed (100). With ordering, the template's pods read the update:
// recorded with the template's resourceVersion, no restart. Without, the
// update is pending, as the release before ordering did.
func TestReconcileOrdersSourceUpdateBeforeTemplateChange(t *testing.T) {
	u := fromYAML(t, webDeployment)
	u.SetUID("5d6f0000-0000-4000-8000-000000000042")
	h0 := newHarness(t, nil, nil, nil)
	recorded := settle(h0, u, dataV1)
	recorded = withAnnotations(recorded, map[string]string{templateHashKey: "0000000000000000"}) // recorded before the template change
	for _, tc := range []struct {
		name    string
		ordered bool
		applied string
		record  string
	}{
		{"ordered: recorded, no restart", true, sourceState(t, cmApp, dataV2).Checksum(testSums, nil),
			h0.reduce(u).TemplateHash + "@100@5d6f0000-0000-4000-8000-000000000042"},
		{"ordering off: pending", false, record.Pending, h0.reduce(u).TemplateHash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, []*unstructured.Unstructured{recorded}, nil, nil)
			h.cfg.OrderByResourceVersion = tc.ordered
			h.c.Rules = decision.NewRules(h.cfg, testSums)
			state := h.reduce(recorded)
			state.TemplateRV = "100" // what the tracker knows from the watch event
			if err := h.workloads[deploymentsGVR].Update(state); err != nil {
				t.Fatal(err)
			}
			src := sourceState(t, cmApp, dataV2)
			src.ResourceVersion = "99"
			if err := h.sources.Update(src); err != nil {
				t.Fatal(err)
			}
			h.c.SourceChanged(cmApp, nil) // the update's grace period is open
			if err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, recorded)); err != nil {
				t.Fatal(err)
			}
			patches := h.patches()
			if len(patches) != 1 {
				t.Fatalf("%d patches, want 1", len(patches))
			}
			want := patchBody("42", annotation(t, map[string]string{cmApp.String(): tc.applied}), tc.record, "spec.template", false)
			if got := withoutRecord(t, patches[0].GetPatch()); got != want {
				t.Errorf("patch body:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestLimitedRecorderDropsBeyondTheBucketAndCounts(t *testing.T) {
	rec := &fakeRecorder{}
	m := metrics.New(func() (int, int) { return 0, 0 })
	l := NewLimitedRecorder(rec, 0.0001, 3, m.EventsDropped)
	for i := 0; i < 10; i++ {
		l.Eventf(nil, nil, corev1.EventTypeNormal, "Restarted", "Restart", "n %d", i)
	}
	if len(rec.events) != 3 || testutil.ToFloat64(m.EventsDropped) != 7 {
		t.Fatalf("%d events passed, %v dropped; want 3 and 7", len(rec.events), testutil.ToFloat64(m.EventsDropped))
	}
}

// A dry run simulates its own writes: a workload it has never written is
// recorded first, then restarted when its data changes, as the real
// controller would, while nothing reaches the API server.
func TestDryRunSimulatesItsWrites(t *testing.T) {
	w := fromYAML(t, webDeployment)
	h := newHarness(t, []*unstructured.Unstructured{w}, []*unstructured.Unstructured{w}, dataV1)
	rec := &fakeRecorder{}
	h.c.Events = rec
	h.c.Config.Settings.DryRun = true
	key := keyOf(deploymentsGVR, w)
	reconcile := func() {
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	reconcile() // nothing new: nothing reported
	h.setSource(dataV2)
	reconcile()
	var reasons []string
	for _, e := range rec.events {
		reasons = append(reasons, e.reason)
	}
	if strings.Join(reasons, ",") != "WouldRecordChecksums,WouldRestart" {
		t.Fatalf("events %v, want WouldRecordChecksums then WouldRestart", reasons)
	}
	if n := len(h.patches()); n != 0 {
		t.Fatalf("%d patches in a dry run", n)
	}
}

// A paused Deployment rolls nothing when its template is patched: the
// restart is still written (resuming rolls it) and the checksums recorded,
// and a RestartNotRolled Warning Event says the running pods keep old data.
func TestReconcileRestartNotRolled(t *testing.T) {
	u := fromYAML(t, webDeployment)
	if err := unstructured.SetNestedField(u.Object, true, "spec", "paused"); err != nil {
		t.Fatal(err)
	}
	settled := settle(newHarness(t, nil, nil, nil), u, dataV1)
	for _, tc := range []struct {
		name       string
		data       map[string]string
		wantEvents int
	}{
		{"source changed: restart written, reported", dataV2, 2}, // Restarted, then RestartNotRolled
		{"nothing changed: nothing reported", dataV1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, []*unstructured.Unstructured{settled}, []*unstructured.Unstructured{settled}, tc.data)
			rec := &fakeRecorder{}
			h.c.Events = rec
			if err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, settled)); err != nil {
				t.Fatal(err)
			}
			if len(rec.events) != tc.wantEvents {
				t.Fatalf("events %+v, want %d", rec.events, tc.wantEvents)
			}
			if tc.wantEvents == 0 {
				if n := len(h.patches()); n != 0 {
					t.Fatalf("%d patches", n)
				}
				return
			}
			e := rec.events[len(rec.events)-1]
			want := "pod template updated for changed configmap/shop/app (all keys), but spec.paused is true: running pods keep the old data until they are replaced"
			if e.eventtype != corev1.EventTypeWarning || e.reason != "RestartNotRolled" || e.note != want {
				t.Errorf("event %+v, want Warning RestartNotRolled %q", e, want)
			}
			patches := h.patches()
			if len(patches) != 1 {
				t.Fatalf("%d patches, want 1", len(patches))
			}
			applied := annotation(t, map[string]string{cmApp.String(): sourceState(t, cmApp, tc.data).Checksum(testSums, nil)})
			if got, want := withoutRecord(t, patches[0].GetPatch()), patchBody("42", applied, h.reduce(settled).TemplateHash, "spec.template", true); got != want {
				t.Errorf("patch body:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// The Restarted Event names the keys that changed among those the workload
// reads, when the grace window of the change knows them.
func TestRestartedEventNamesTheChangedKeys(t *testing.T) {
	w := fromYAML(t, webDeployment)
	h := newHarness(t, nil, nil, map[string]string{"a": "2", "b": "1"})
	settled := settle(h, w, map[string]string{"a": "1", "b": "1"})
	h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), settled.DeepCopy())
	h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
	h.cache(settled)
	rec := &fakeRecorder{}
	h.c.Events = rec
	h.c.grace.Observe(cmApp, reconcileNow.Add(-time.Minute), false, []string{"a"}) // over: due
	if err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, w)); err != nil {
		t.Fatal(err)
	}
	want := "Restarted to pick up changed data: configmap/shop/app (changed keys: a)"
	if len(rec.events) != 1 || rec.events[0].note != want {
		t.Fatalf("events %+v, want %q", rec.events, want)
	}
}

// A regex source list reads the sources its entries match; an entry that is
// no regular expression is reported once as a Warning Event naming the
// annotation and the entry (not at every reconcile), and again when the
// annotation changes to another bad entry.
func TestReconcileRegexListWarnsOnceAboutBadEntries(t *testing.T) {
	h := newHarness(t, nil, nil, dataV1)
	h.cfg.SourceLists = []config.SourceList{{Annotation: "example.com/reload", Kind: "configmap", OptIn: true, Regex: true}}
	rec := &fakeRecorder{}
	h.c.Events = rec
	u := fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: lister, namespace: shop, resourceVersion: "5", annotations: {example.com/reload: "ap+, a["}}
spec: {template: {spec: {containers: [{name: c, image: x}]}}}
`)
	h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), u.DeepCopy())
	h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
	h.cache(u)
	key := keyOf(deploymentsGVR, u)
	for range 2 {
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	var warnings []string
	for _, e := range rec.events {
		if e.eventtype == corev1.EventTypeWarning {
			warnings = append(warnings, e.reason+": "+e.note)
		}
	}
	want := []string{"InvalidSourceList: example.com/reload: entry \"a[\" is not a regular expression, skipped: error parsing regexp: missing closing ]: `[)$`"}
	if !reflect.DeepEqual(warnings, want) {
		t.Fatalf("warnings\n%q\nwant\n%q", warnings, want)
	}
	patches := h.patches()
	if len(patches) == 0 || !strings.Contains(string(patches[0].GetPatch()), cmApp.String()) {
		t.Fatalf("patches %v: want the checksums of %s, which ap+ matches, recorded", patches, cmApp)
	}
	h.cache(withAnnotations(u, map[string]string{"example.com/reload": "b("}))
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if last := rec.events[len(rec.events)-1]; last.reason != "InvalidSourceList" || !strings.Contains(last.note, `"b("`) {
		t.Errorf("last event %+v, want a warning about b(", last)
	}
}

// A deleted source its pods read optionally restarts the workload once
// (recorded absent, after the API confirms it); a deleted required source
// restarts nothing and is reported once in a Warning Event, not at every
// reconcile.
func TestReconcileDeletedSources(t *testing.T) {
	for _, tc := range []struct {
		name     string
		optional bool
		restarts bool
		warnings []string
	}{
		{"optional: restart", true, true, nil},
		{"required: reported", false, false, []string{"RequiredSourceDeleted: " + cmApp.String() + " was deleted; its pods need it, so nothing restarts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, strings.Replace(webDeployment, "{configMapRef: {name: app}}", fmt.Sprintf("{configMapRef: {name: app, optional: %v}}", tc.optional), 1))
			settled := settle(newHarness(t, nil, nil, nil), u, dataV1)
			h := newHarness(t, []*unstructured.Unstructured{settled}, []*unstructured.Unstructured{settled}, nil) // app is gone
			rec := &fakeRecorder{}
			h.c.Events = rec
			for range 2 {
				if err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, settled)); err != nil {
					t.Fatal(err)
				}
			}
			var warnings []string
			for _, e := range rec.events {
				if e.eventtype == corev1.EventTypeWarning {
					warnings = append(warnings, e.reason+": "+e.note)
				}
			}
			if len(warnings) != len(tc.warnings) || (len(warnings) == 1 && !strings.HasPrefix(warnings[0], tc.warnings[0])) {
				t.Errorf("warnings %q, want %q", warnings, tc.warnings)
			}
			patches := h.patches()
			if !tc.restarts {
				if len(patches) != 0 {
					t.Fatalf("%d patches, want none", len(patches))
				}
				return
			}
			if len(patches) != 1 || h.existsCalls == 0 {
				t.Fatalf("%d patches after %d existence checks, want one restart after a check", len(patches), h.existsCalls)
			}
			if last := rec.events[len(rec.events)-1]; last.reason != "Restarted" || !strings.HasSuffix(last.note, cmApp.String()+" (deleted)") {
				t.Errorf("event %+v, want Restarted naming %s (deleted)", last, cmApp)
			}
			want := patchBody("42", annotation(t, map[string]string{cmApp.String(): ""}), h.reduce(settled).TemplateHash, "spec.template", true)
			if got := withoutRecord(t, patches[0].GetPatch()); got != want {
				t.Errorf("patch body:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// With Reloader's metric names exported, each restart patch is counted by
// success, once the API server answered: taken, or refused. Records are no
// restarts, and a dry run sends no patch: neither counts.
func TestReloaderMetricCountsRestartPatches(t *testing.T) {
	executed := func(h *harness, success string) float64 {
		t.Helper()
		families, err := h.c.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "reloader_reload_executed_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == success {
					return m.GetCounter().GetValue()
				}
			}
		}
		t.Fatalf("reloader_reload_executed_total{success=%q} not served", success)
		return 0
	}
	for _, tc := range []struct {
		name      string
		refuse    bool
		firstSeen bool
		ok, fail  float64
	}{
		{"restart taken", false, false, 1, 0},
		{"restart refused", true, false, 0, 1},
		{"first sight recorded: no restart", false, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fromYAML(t, webDeployment)
			h := newHarness(t, nil, nil, dataV2)
			h.c.Metrics.ExportReloaderNames(false)
			cached := settle(h, w, dataV1)
			if tc.firstSeen {
				cached = w
			}
			h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), cached.DeepCopy())
			h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
			h.cache(cached)
			if tc.refuse {
				h.client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no"))
				})
			}
			_ = h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, w))
			if len(h.patches()) != 1 {
				t.Fatalf("%d patches, want 1", len(h.patches()))
			}
			if ok, fail := executed(h, "true"), executed(h, "false"); ok != tc.ok || fail != tc.fail {
				t.Errorf("success=true %v, success=false %v; want %v and %v", ok, fail, tc.ok, tc.fail)
			}
		})
	}
}
