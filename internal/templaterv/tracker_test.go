package templaterv

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

// exampleConfig compiles examples/config.yaml.
func exampleConfig(t testing.TB) *config.Config { return testfixture.ExampleConfig(t) }

// deploymentKind returns the configured workload kind of Deployments.
func deploymentKind(t testing.TB, cfg *config.Config) config.WorkloadKind {
	return testfixture.WorkloadKind(t, cfg, testfixture.Deployments)
}

func fromYAML(t testing.TB, s string) *unstructured.Unstructured { return testfixture.FromYAML(t, s) }

// trackedDeployment is a Deployment at a resourceVersion, with an image (the
// template) and a restart timestamp (not part of the template hash).
func trackedDeployment(t *testing.T, uid, rv, image, stamp string) *unstructured.Unstructured {
	t.Helper()
	return fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, uid: `+uid+`, resourceVersion: "`+rv+`"}
spec:
  template:
    metadata: {annotations: {com.xing.deployment-restart.timestamp: "`+stamp+`"}}
    spec: {containers: [{name: app, image: "`+image+`"}]}
`)
}

// The tracker knows a template's resourceVersion exactly when the informer
// delivered the write that set it as a watch event, and says "unknown" for
// anything seen as a state (a list, a watch's initial events).
func TestTrackerFollowsTheWriteThatSetTheTemplate(t *testing.T) {
	cfg := exampleConfig(t)
	tracker := New(true)
	transform := tracker.Reduce(deploymentKind(t, cfg), cfg)
	steps := []struct {
		name   string
		phase  func()
		obj    *unstructured.Unstructured
		wantRV string
	}{
		{"start-up list: a state, unknown", tracker.BeginList, trackedDeployment(t, "u1", "10", "web:1", ""), ""},
		{"watch from the list's resourceVersion: a status write keeps unknown", func() { tracker.BeginWatch(true) },
			trackedDeployment(t, "u1", "11", "web:1", ""), ""},
		{"template change: exactly this write", nil, trackedDeployment(t, "u1", "20", "web:2", ""), "20"},
		{"status write after it: kept", nil, trackedDeployment(t, "u1", "21", "web:2", ""), "20"},
		{"our own restart (timestamp only): kept", nil, trackedDeployment(t, "u1", "22", "web:2", "2030-01-01T00:00:00Z"), "20"},
		{"relist: unchanged template keeps what was known", tracker.BeginList, trackedDeployment(t, "u1", "30", "web:2", "2030-01-01T00:00:00Z"), "20"},
		{"relist: template changed during the gap, unknown", nil, trackedDeployment(t, "u1", "31", "web:3", ""), ""},
		{"watch again: changed back, exactly this write", func() { tracker.BeginWatch(true) }, trackedDeployment(t, "u1", "40", "web:2", ""), "40"},
		{"deleted (final state of the same object): kept", nil, trackedDeployment(t, "u1", "41", "web:2", ""), "40"},
		{"re-created under the same name: its creation", nil, trackedDeployment(t, "u2", "50", "web:2", ""), "50"},
		{"watch with initial events: states until they end", func() { tracker.BeginWatch(false) }, trackedDeployment(t, "u2", "55", "web:4", ""), ""},
		{"watch from resourceVersion 0 (initial events without end marker): unknown", func() { tracker.BeginWatch(false) },
			trackedDeployment(t, "u2", "56", "web:5", ""), ""},
	}
	for _, s := range steps {
		if s.phase != nil {
			s.phase()
		}
		out, err := transform(s.obj)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.(*catalog.WorkloadState).TemplateRV; got != s.wantRV {
			t.Errorf("%s: TemplateRV %q, want %q", s.name, got, s.wantRV)
		}
	}

	// Initial events end with a bookmark; after the informer took it, writes are live.
	gen := tracker.BeginWatch(false)
	out, _ := transform(trackedDeployment(t, "u2", "60", "web:6", ""))
	if rv := out.(*catalog.WorkloadState).TemplateRV; rv != "" {
		t.Errorf("initial event: TemplateRV %q", rv)
	}
	tracker.InitialEventsEnded(gen)
	out, _ = transform(trackedDeployment(t, "u2", "61", "web:7", ""))
	if rv := out.(*catalog.WorkloadState).TemplateRV; rv != "61" {
		t.Errorf("write after the initial events: TemplateRV %q, want 61", rv)
	}
	// The end of an older watch's initial events does not make a later list live.
	old := tracker.BeginWatch(false)
	tracker.BeginList()
	tracker.InitialEventsEnded(old)
	out, _ = transform(trackedDeployment(t, "u2", "70", "web:8", ""))
	if rv := out.(*catalog.WorkloadState).TemplateRV; rv != "" {
		t.Errorf("list after a stale end of initial events: TemplateRV %q, want unknown", rv)
	}
}

// Under a label selector, a workload appearing in the watch may be an older
// one whose labels now match: its template's resourceVersion is unknown.
func TestTrackerCreationsUnderASelector(t *testing.T) {
	cfg := exampleConfig(t)
	for _, tc := range []struct {
		creations bool
		want      string
	}{{true, "7"}, {false, ""}} {
		tracker := New(tc.creations)
		tracker.BeginWatch(true)
		out, err := tracker.Reduce(deploymentKind(t, cfg), cfg)(trackedDeployment(t, "u1", "7", "web:1", ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := out.(*catalog.WorkloadState).TemplateRV; got != tc.want {
			t.Errorf("creations %v: TemplateRV %q, want %q", tc.creations, got, tc.want)
		}
	}
}

// Memory stays bounded: deleted workloads are forgotten (also through a
// tombstone), but not a workload re-created under the same name.
func TestTrackerForgets(t *testing.T) {
	cfg := exampleConfig(t)
	tracker := New(true)
	transform := tracker.Reduce(deploymentKind(t, cfg), cfg)
	tracker.BeginWatch(true)
	first, _ := transform(trackedDeployment(t, "u1", "5", "web:1", ""))
	if tracker.Len() != 1 {
		t.Fatalf("Len %d", tracker.Len())
	}
	// Re-created before the deletion reached the handler: the old UID's
	// deletion must not forget the new object.
	second, _ := transform(trackedDeployment(t, "u2", "8", "web:1", ""))
	tracker.Forget(first)
	if tracker.Len() != 1 {
		t.Fatal("forgetting the old object forgot the new one")
	}
	tracker.Forget(cache.DeletedFinalStateUnknown{Key: "shop/web", Obj: second})
	if tracker.Len() != 0 {
		t.Fatal("a tombstone was not forgotten")
	}
	tracker.Forget(nil)
	tracker.Forget(cache.DeletedFinalStateUnknown{Key: "shop/web"})

	// Objects already reduced, and tombstones, pass through unobserved.
	reduced := second.(*catalog.WorkloadState)
	for _, obj := range []interface{}{reduced, cache.DeletedFinalStateUnknown{Key: "shop/web", Obj: reduced}, nil} {
		if out, err := transform(obj); err != nil || out != obj {
			t.Errorf("transform(%T) = %v, %v; want it unchanged", obj, out, err)
		}
	}
	if tracker.Len() != 0 {
		t.Error("a passed-through object was remembered")
	}
}
