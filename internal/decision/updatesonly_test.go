package decision

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/members"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/refs"
)

var spcVault = catalog.SourceID{Kind: "secretproviderclasspodstatus", Namespace: "shop", Name: "vault"}

// csiLife is the default lifecycle with a kind of lifecycle updatesOnly.
var csiLife = config.SourceLifecycle{RestartOnCreate: true, RestartOnDelete: true, UpdatesOnly: []string{spcVault.Kind}}

// driver plays the CSI driver's part: one SecretProviderClassPodStatus per
// pod, created with the version the pod mounted, updated on rotation,
// deleted with the pod; every write at the next resourceVersion.
type driver struct {
	t       *testing.T
	members *refs.Members
	rv      int
	objects map[string]*unstructured.Unstructured
}

func newDriver(t *testing.T) *driver {
	m, err := refs.CompileMembers("status.secretProviderClassName", "status.objects[*]", "id", "version")
	if err != nil {
		t.Fatal(err)
	}
	return &driver{t: t, members: m, objects: map[string]*unstructured.Unstructured{}}
}

// do runs one step: "create POD VERSION", "update POD VERSION" or
// "delete POD".
func (d *driver) do(step string) {
	f := strings.Fields(step)
	d.rv++
	switch f[0] {
	case "create":
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetName(f[1] + "-shop-vault")
		u.SetNamespace("shop")
		u.SetGeneration(1)
		d.objects[f[1]] = u
		d.setVersion(u, f[2])
	case "update":
		u := d.objects[f[1]]
		u.SetGeneration(u.GetGeneration() + 1)
		d.setVersion(u, f[2])
	case "delete":
		delete(d.objects, f[1])
	default:
		d.t.Fatalf("unknown step %q", step)
	}
}

func (d *driver) setVersion(u *unstructured.Unstructured, version string) {
	u.SetResourceVersion(fmt.Sprint(d.rv))
	u.Object["status"] = map[string]interface{}{
		"podName": u.GetName(), "secretProviderClassName": "vault", "mounted": true,
		"objects": []interface{}{map[string]interface{}{"id": "secret/db", "version": version}},
	}
}

// Source looks the source up as the catalog does: the group of the
// members, reduced as the informer reduces them.
func (d *driver) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	var states []*members.State
	for _, u := range d.objects {
		m, err := members.Reduce(d.members)(u.DeepCopy())
		if err != nil {
			d.t.Fatal(err)
		}
		states = append(states, m.(*members.State))
	}
	return members.Group(id, states)
}

// sources are the sources as a snapshot holds them: the vault's state, if
// it has members.
func (d *driver) sources() sourceMap {
	s, ok := d.Source(spcVault)
	if !ok {
		return sourceMap{}
	}
	return sourceMap{spcVault: s}
}

// checksumOf is the checksum of a source whose pods mount version.
func (d *driver) checksumOf(version string) string {
	other := newDriver(d.t)
	other.do("create x " + version)
	s, _ := other.Source(spcVault)
	return s.Checksum(testSums, nil)
}

// TestUpdatesOnlyScenarios walks a Deployment whose pods mount one
// SecretProviderClass through the driver's lifecycle. Each step is a
// driver's write, then two decisions, as the controller makes them: while
// the grace period it opens is running, and once it ended (or after the
// controller restarted, which forgets grace periods). A decision's patch
// is applied to the workload; a restart counts.
func TestUpdatesOnlyScenarios(t *testing.T) {
	type step struct {
		do       string
		restarts int    // restarts so far
		recorded string // the version recorded; "" none
	}
	tests := []struct {
		name  string
		setup []string // done before the workload is first decided
		steps []step
	}{
		{name: "opt-in with baseline members records once", setup: []string{"create a v1", "create b v1"},
			steps: []step{{do: "", recorded: "v1"}}},
		{name: "opt-in before any member: nothing, then the first member fills the record", steps: []step{
			{do: ""}, {do: "create a v1", recorded: "v1"}, {do: "create b v2", recorded: "v1"}}},
		{name: "one pod rotates: one restart; the others rotating after it: no second", setup: []string{"create a v1", "create b v1"},
			steps: []step{
				{do: "update a v2", restarts: 1, recorded: "v2"},
				{do: "update b v2", restarts: 1, recorded: "v2"},
				// The restart's new pods mount the new version; the old ones go.
				{do: "create c v2", restarts: 1, recorded: "v2"},
				{do: "create d v2", restarts: 1, recorded: "v2"},
				{do: "delete a", restarts: 1, recorded: "v2"},
				{do: "delete b", restarts: 1, recorded: "v2"},
			}},
		{name: "new pods delete old members before these rotate: nothing", setup: []string{"create a v1", "create b v1"},
			steps: []step{
				{do: "update a v2", restarts: 1, recorded: "v2"},
				{do: "create c v2", restarts: 1, recorded: "v2"},
				{do: "delete b", restarts: 1, recorded: "v2"},
				{do: "delete a", restarts: 1, recorded: "v2"},
				{do: "create d v2", restarts: 1, recorded: "v2"},
			}},
		{name: "scale-up after a rotation at the provider, before the old pods rotated", setup: []string{"create a v1", "create b v1"},
			steps: []step{
				{do: "create c v2", recorded: "v1"},
				{do: "update a v2", restarts: 1, recorded: "v2"},
				{do: "update b v2", restarts: 1, recorded: "v2"},
				{do: "update c v2", restarts: 1, recorded: "v2"}, // a remount, same version
			}},
		{name: "all members deleted: unknown, never absent", setup: []string{"create a v1", "create b v1"},
			steps: []step{
				{do: "delete a", recorded: "v1"},
				{do: "delete b", recorded: "v1"},
				{do: "create c v1", recorded: "v1"},
				{do: "create d v2", recorded: "v1"},
			}},
		{name: "a second rotation restarts again", setup: []string{"create a v1"},
			steps: []step{
				{do: "update a v2", restarts: 1, recorded: "v2"},
				{do: "update a v3", restarts: 2, recorded: "v3"},
			}},
	}
	for _, tt := range tests {
		for _, crashed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/controller restarted mid-rotation %v", tt.name, crashed), func(t *testing.T) {
				d := newDriver(t)
				for _, s := range tt.setup {
					d.do(s)
				}
				w := &catalog.WorkloadState{TemplateHash: tmplNow, References: []catalog.Reference{{ID: spcVault}}}
				w.Namespace, w.Name = "shop", "web"
				restarts := 0
				decide := func(windows dueAt, now time.Time) {
					plan := compare(w, d.sources(), graceAt(windows, true), now, false, csiLife)
					if !plan.Patch {
						return
					}
					b, err := json.Marshal(plan.Applied)
					if err != nil {
						t.Fatal(err)
					}
					w.Applied, w.HasApplied, w.AppliedTemplateHash = string(b), true, plan.TemplateRecord
					if plan.Restart {
						restarts++
					}
				}
				// The workload is opted in: first sight of what the setup made.
				decide(dueAt{}, decideNow)
				for _, s := range tt.steps {
					if s.do != "" {
						d.do(s.do)
					}
					if strings.HasPrefix(s.do, "update") && !crashed {
						// The update's grace period is open: nothing yet.
						before := restarts
						decide(dueAt{spcVault: decideNow.Add(time.Second)}, decideNow)
						if restarts != before {
							t.Fatalf("after %q: restarted inside the grace period", s.do)
						}
					}
					decide(dueAt{}, decideNow)
					applied, err := record.ParseApplied(w.Applied)
					if err != nil {
						t.Fatal(err)
					}
					got, recorded := applied[spcVault.String()]
					want := ""
					if s.recorded != "" {
						want = d.checksumOf(s.recorded)
					}
					if restarts != s.restarts || got != want || recorded != (s.recorded != "") {
						t.Fatalf("after %q: %d restarts, recorded %q (%v); want %d, %s (%q)", s.do, restarts, got, recorded, s.restarts, s.recorded, want)
					}
				}
				// A decision again changes nothing: idempotent.
				before := w.Applied
				decide(dueAt{}, decideNow)
				if w.Applied != before || restarts != tt.steps[len(tt.steps)-1].restarts {
					t.Errorf("deciding again changed %s into %s", before, w.Applied)
				}
			})
		}
	}
}

// TestBaselinePatch: the exact plans of a baseline source. It never
// restarts, fills a missing record, and never overwrites one, even when
// the template changed (recordOnly) or an update is in its grace period;
// a pending record still restarts.
func TestBaselinePatch(t *testing.T) {
	d := newDriver(t)
	d.do("create a v2")
	v1, v2 := d.checksumOf("v1"), d.checksumOf("v2")
	other := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "other"}
	tests := []struct {
		name     string
		applied  map[string]string // nil: none
		tmplHash string
		windows  dueAt
		want     map[string]string
		restart  bool
	}{
		{name: "first sight", want: map[string]string{spcVault.String(): v2}},
		{name: "source new to the record", applied: map[string]string{other.String(): ""}, tmplHash: tmplNow,
			want: map[string]string{spcVault.String(): v2}},
		{name: "recorded other data: kept, no restart", applied: map[string]string{spcVault.String(): v1}, tmplHash: tmplNow,
			want: map[string]string{spcVault.String(): v1}},
		{name: "template changed: kept", applied: map[string]string{spcVault.String(): v1}, tmplHash: tmplOld,
			want: map[string]string{spcVault.String(): v1}},
		{name: "grace period open: kept", applied: map[string]string{spcVault.String(): v1}, tmplHash: tmplNow,
			windows: dueAt{spcVault: decideNow.Add(time.Second)}, want: map[string]string{spcVault.String(): v1}},
		{name: "recorded absent (never by this kind): filled", applied: map[string]string{spcVault.String(): ""}, tmplHash: tmplNow,
			want: map[string]string{spcVault.String(): v2}},
		{name: "pending: the restart it says is due", applied: map[string]string{spcVault.String(): record.Pending}, tmplHash: tmplNow,
			want: map[string]string{spcVault.String(): v2}, restart: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &catalog.WorkloadState{TemplateHash: tmplNow, AppliedTemplateHash: tt.tmplHash, References: []catalog.Reference{{ID: spcVault}}}
			if tt.applied != nil {
				w.Applied, w.HasApplied = annotation(t, tt.applied), true
			}
			plan := compare(w, d.sources(), graceAt(tt.windows, true), decideNow, false, csiLife)
			if plan.Restart != tt.restart || fmt.Sprint(plan.Applied) != fmt.Sprint(tt.want) {
				t.Errorf("restart %v, applied %v; want %v, %v", plan.Restart, plan.Applied, tt.restart, tt.want)
			}
			if len(plan.RequiredGone) > 0 {
				t.Errorf("required gone %v", plan.RequiredGone)
			}
		})
	}
}
