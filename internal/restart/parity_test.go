package restart

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/status"
)

// explainer is explain over the fleet harness's fake cluster, with the
// controller's configuration.
type explainer struct {
	f   *fleetHarness
	cfg *explain.Config
}

func newExplainer(t *testing.T, f *fleetHarness) *explainer {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := explain.ParseConfig(data, examplePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sums = testSums
	return &explainer{f: f, cfg: cfg}
}

// action is explain's verdict on the named workload, read from the cluster
// (the fake API server) with the namespace's workloads listed.
func (e *explainer) action(t *testing.T, name string) string {
	t.Helper()
	kind := e.f.kindOf(deploymentsGVR)
	fetch := func(_ config.SourceKind, namespace, name string) (*catalog.SourceState, error) {
		s, ok := e.f.c.Catalog.Source(catalog.SourceID{Kind: "configmap", Namespace: namespace, Name: name})
		if !ok {
			return nil, nil
		}
		return s, nil
	}
	fleet := func() []explain.Workload {
		var out []explain.Workload
		for _, k := range e.f.keys {
			out = append(out, explain.Workload{Kind: kind, Object: e.f.get(k.Name)})
		}
		return out
	}
	r := e.cfg.ExplainWorkload(kind, e.f.get(name), fetch, fleet, e.f.c.Clock())
	return r.Decision.Action
}

// statusActions are status's verdicts on the workloads it lists (held,
// waiting, queued, due or undecided), from one listing of the fake API
// server's workloads and the cache's source; a workload it does not list
// has nothing to restart.
func (e *explainer) statusActions(t *testing.T) map[string]string {
	t.Helper()
	l := status.NewListing(e.cfg, []string{""}, nil)
	if src, ok := e.f.c.Catalog.Source(cmApp); ok {
		l.AddSourceState(cmApp, src)
	}
	kind := e.f.kindOf(deploymentsGVR)
	for _, k := range e.f.keys {
		l.AddWorkload(kind, e.f.get(k.Name))
	}
	out := map[string]string{}
	for _, rs := range status.Build(l, "all namespaces", e.f.c.Clock()).Restarts {
		out[strings.TrimPrefix(rs.Workload, "deployments.apps/shop/")] = rs.Action
	}
	return out
}

// controllerAction is the controller's verdict on the named workload from
// its caches and memory, without acting on it.
func (f *fleetHarness) controllerAction(t *testing.T, name string) string {
	t.Helper()
	key := catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "shop", Name: name}
	if _, ok := f.c.Catalog.Workload(key); !ok {
		t.Fatalf("%s not cached", name)
	}
	snap, err := f.c.load(context.Background(), key)
	if err != nil {
		t.Fatalf("%s: load: %v", name, err)
	}
	if !snap.OwnWrite.IsZero() {
		t.Fatalf("%s: the cache is behind a write", name)
	}
	v := f.c.Rules.Decide(snap)
	if v.NeedsPacing {
		l := f.c.Pacing.Lock()
		facts := l.Facts(key, snap.Workload.State.References, v.Deliver, snap.Sources, f.c.Clock())
		l.Unlock()
		snap.Pacing = &facts
		v = f.c.Rules.Pace(snap, v)
	}
	return string(v.Action)
}

// Explain's verdict is the controller's, and status's is explain's, workload
// by workload (status deciding them all from one listing), through the
// states of a change of a source shared by ten workloads: first sight, up
// to date, due (waves: one restarts, the rest queue), rolling out, failed
// (held), held, released, recovered, and a breaker hold.
func TestExplainAgreesWithController(t *testing.T) {
	f := newFleetHarness(t, 10)
	e := newExplainer(t, f)
	agree := func(state string, want map[string]string) {
		t.Helper()
		f.sync()
		listed := e.statusActions(t)
		for _, k := range f.keys {
			got, ctl := e.action(t, k.Name), f.controllerAction(t, k.Name)
			if got != ctl {
				t.Errorf("%s: %s: explain says %q, the controller %q", state, k.Name, got, ctl)
			}
			if st, ok := listed[k.Name]; ok && st != got || !ok && got != explain.ActionNothing && got != explain.ActionRecord {
				t.Errorf("%s: %s: status says %q (listed: %v), explain %q", state, k.Name, st, ok, got)
			}
			if w, ok := want[k.Name]; ok && ctl != w {
				t.Errorf("%s: %s: the controller says %q, want %q", state, k.Name, ctl, w)
			} else if !ok && want["*"] != "" && ctl != want["*"] {
				t.Errorf("%s: %s: the controller says %q, want %q", state, k.Name, ctl, want["*"])
			}
		}
	}
	// Two opt-outs of the change first: recorded, not restarted for.
	for name, ann := range map[string]map[string]string{
		"w08": {ignoreSrcKey: "app"},
		"w09": {appliedKey: ""},
	} {
		u := withAnnotations(f.get(name), ann)
		if name == "w09" {
			delete(u.Object["metadata"].(map[string]interface{})["annotations"].(map[string]interface{}), appliedKey)
		}
		if _, err := f.client.Resource(deploymentsGVR).Namespace("shop").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	agree("due, paced; one ignores the source, one is seen first", map[string]string{"w00": "restart", "w08": "record", "w09": "record", "*": "queue"})
	f.reconcileAll()
	agree("recorded", map[string]string{"w00": "nothing", "w08": "nothing", "w09": "nothing", "*": "queue"})
	agree("first wave rolling out", map[string]string{"w00": "nothing", "w08": "nothing", "w09": "nothing", "*": "queue"})
	f.c.Clock = func() time.Time { return reconcileNow.Add(11 * time.Minute) } // past the 10m deadline
	f.reconcileAll()                                                           // records the failure
	f.sync()
	agree("first wave failed", map[string]string{"w00": "nothing", "w08": "nothing", "w09": "nothing", "*": "hold"})
	f.step() // writes the holds
	agree("held", map[string]string{"w00": "nothing", "w08": "nothing", "w09": "nothing", "*": "hold"})
	f.rollOut("w00")
	f.step() // records the recovery
	agree("recovered", map[string]string{"w00": "nothing", "w01": "restart", "w02": "restart", "w08": "nothing", "w09": "nothing", "*": "queue"})
	for round := 0; round < 6; round++ {
		f.rollOut(f.step()...)
	}
	agree("all restarted and rolled out", map[string]string{"*": "nothing"})

	// The breaker: past its budget, a new change holds every one; the
	// controller saw the change now, and explain, which cannot know when
	// sources last changed, assumes the same.
	f.usedBudget(f.c.Clock(), false)
	f.setSource(dataV1)
	f.c.SourceChanged(cmApp, nil)
	f.c.Clock = func() time.Time { return reconcileNow.Add(11*time.Minute + 20*time.Second) } // past the grace period
	agree("breaker tripped", map[string]string{"w08": "record", "*": "hold"})
	f.step() // writes the breaker holds
	agree("breaker held", map[string]string{"w08": "nothing", "*": "hold"})
}
