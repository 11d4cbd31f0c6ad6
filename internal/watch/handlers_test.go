package watch

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

type recorder struct {
	sources   []catalog.SourceID
	workloads []catalog.WorkloadKey
	annotated []catalog.SourceID
	deleted   []catalog.SourceID
}

func (r *recorder) SourceAnnotated(id catalog.SourceID) { r.annotated = append(r.annotated, id) }

func (r *recorder) SourceChanged(id catalog.SourceID, _ []string) { r.sources = append(r.sources, id) }
func (r *recorder) SourceCreated(id catalog.SourceID)             { r.sources = append(r.sources, id) }
func (r *recorder) SourceDeleted(id catalog.SourceID)             { r.deleted = append(r.deleted, id) }
func (r *recorder) WorkloadChanged(key catalog.WorkloadKey)       { r.workloads = append(r.workloads, key) }

type listedRecorder struct {
	recorder
	listed []catalog.WorkloadKey
}

func (r *listedRecorder) WorkloadListed(key catalog.WorkloadKey) { r.listed = append(r.listed, key) }

func sourceState(rv string, digests map[string]byte) *catalog.SourceState {
	m := map[string]checksum.Digest{}
	for k, b := range digests {
		m[k] = checksum.Digest{b}
	}
	s := &catalog.SourceState{Digests: checksum.DigestsOf(m)}
	s.Name, s.Namespace, s.ResourceVersion = "app", "shop", rv
	return s
}

func TestSourceHandlerComputesKeysOnlyForDataChanges(t *testing.T) {
	id := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
	v1 := sourceState("1", map[string]byte{"a": 1})
	v1Relabelled := sourceState("2", map[string]byte{"a": 1})
	v2 := sourceState("3", map[string]byte{"a": 2})
	released := sourceState("4", map[string]byte{"a": 1})
	released.Annotations = map[string]string{"release": "0123456789abcdef"}
	cases := []struct {
		name    string
		event   func(h cache.ResourceEventHandler)
		want    int
		deleted int
	}{
		{"initial list is not a change", func(h cache.ResourceEventHandler) { h.OnAdd(v1, true) }, 0, 0},
		{"created after start", func(h cache.ResourceEventHandler) { h.OnAdd(v1, false) }, 1, 0},
		{"metadata-only update", func(h cache.ResourceEventHandler) { h.OnUpdate(v1, v1Relabelled) }, 0, 0},
		{"data update", func(h cache.ResourceEventHandler) { h.OnUpdate(v1, v2) }, 1, 0},
		{"release annotation is no data change", func(h cache.ResourceEventHandler) { h.OnUpdate(v1, released) }, 0, 0},
		{"deleted", func(h cache.ResourceEventHandler) { h.OnDelete(v1) }, 0, 1},
		{"tombstone", func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "shop/app", Obj: v1})
		}, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			m := metrics.New(func() (int, int) { return 0, 0 })
			c.event(sourceHandler{kind: "configmap", handler: rec, metrics: m})
			if len(rec.sources) != c.want || len(rec.deleted) != c.deleted {
				t.Fatalf("got %v and deletions %v, want %d change(s), %d deletion(s)", rec.sources, rec.deleted, c.want, c.deleted)
			}
			for _, got := range append(rec.sources, rec.deleted...) {
				if got != id {
					t.Fatalf("got %v, want %v", got, id)
				}
			}
		})
	}
}

func TestWorkloadHandlerSkipsUpdatesDecisionsDoNotSee(t *testing.T) {
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	base := func(rv string) *catalog.WorkloadState {
		w := &catalog.WorkloadState{OptedIn: true, TemplateHash: "t1",
			References: []catalog.Reference{{ID: catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}}}}
		w.Name, w.Namespace, w.ResourceVersion = "web", "shop", rv
		return w
	}
	statusOnly := base("2")
	optedOut := base("3")
	optedOut.OptedIn = false
	newRef := base("4")
	newRef.References = append(newRef.References, catalog.Reference{ID: catalog.SourceID{Kind: "secret", Namespace: "shop", Name: "db"}})
	keyNarrowed := base("5")
	keyNarrowed.References[0].Keys = []string{"a"}

	cases := []struct {
		name string
		next *catalog.WorkloadState
		want int
	}{
		{"status-only update", statusOnly, 0},
		{"opt-in removed", optedOut, 1},
		{"new reference", newRef, 1},
		{"whole-object reference narrowed to a key", keyNarrowed, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			h := workloadHandler{resource: deployments, handler: rec}
			h.OnUpdate(base("1"), c.next)
			if len(rec.workloads) != c.want {
				t.Fatalf("got %v, want %d key(s)", rec.workloads, c.want)
			}
		})
	}
	rec := &recorder{}
	workloadHandler{resource: deployments, handler: rec}.OnAdd(base("1"), true)
	want := catalog.WorkloadKey{Resource: deployments, Namespace: "shop", Name: "web"}
	if len(rec.workloads) != 1 || rec.workloads[0] != want {
		t.Fatalf("add: got %v, want [%v]", rec.workloads, want)
	}
	// A handler that takes the first list apart (the controller) gets it
	// there; a workload added later is a change.
	lr := &listedRecorder{}
	lh := workloadHandler{resource: deployments, handler: lr}
	lh.OnAdd(base("1"), true)
	lh.OnAdd(base("2"), false)
	if len(lr.listed) != 1 || lr.listed[0] != want || len(lr.workloads) != 1 || lr.workloads[0] != want {
		t.Fatalf("listed %v, changed %v; want one each", lr.listed, lr.workloads)
	}
	// Deletes too (also as a tombstone): the controller forgets what it kept.
	rec = &recorder{}
	h := workloadHandler{resource: deployments, handler: rec}
	h.OnDelete(base("2"))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "shop/web", Obj: base("3")})
	if len(rec.workloads) != 2 || rec.workloads[0] != want || rec.workloads[1] != want {
		t.Fatalf("delete: got %v, want [%v %v]", rec.workloads, want, want)
	}
}

// Before the informers exist there is nothing to check, which must not read
// as "synced": /readyz would answer 200 before any cache is filled.
func TestNotReadyBeforeTheInitialSync(t *testing.T) {
	w := &Watcher{}
	if err := w.Ready(); err == nil {
		t.Fatal("ready before any informer started")
	}
	if err := w.WaitForSync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(); err != nil {
		t.Fatalf("not ready after the initial sync: %v", err)
	}
	w.synced = append(w.synced, func() bool { return false })
	if err := w.Ready(); err == nil {
		t.Fatal("ready while a later informer has not synced")
	}
}

// A change of a kept annotation (release, ignore) alone is reported as such,
// so the readers are decided again at once, without a grace period.
func TestSourceHandlerReportsAnnotations(t *testing.T) {
	v1 := sourceState("1", map[string]byte{"a": 1})
	released := sourceState("2", map[string]byte{"a": 1})
	released.Annotations = map[string]string{"release": "0123456789abcdef"}
	both := sourceState("3", map[string]byte{"a": 2})
	both.Annotations = map[string]string{"release": "x"}
	rec := &recorder{}
	h := sourceHandler{kind: "configmap", handler: rec, metrics: metrics.New(func() (int, int) { return 0, 0 })}
	h.OnUpdate(v1, released)
	h.OnUpdate(released, released)
	h.OnUpdate(released, both)
	if len(rec.annotated) != 1 || len(rec.sources) != 1 {
		t.Fatalf("annotated %v, changed %v", rec.annotated, rec.sources)
	}
}
