package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// fakeAccess answers access reviews from a set of denied verbs, as a
// SelfSubjectAccessReview would.
type fakeAccess struct {
	mu     sync.Mutex
	denied map[string]bool // "verb resource namespace"
	fail   bool
}

func accessKey(verb string, gvr schema.GroupVersionResource, ns string) string {
	return verb + " " + gvr.String() + " " + ns
}

func (a *fakeAccess) set(denied bool, gvr schema.GroupVersionResource, ns string, verbs ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.denied == nil {
		a.denied = map[string]bool{}
	}
	for _, v := range verbs {
		a.denied[accessKey(v, gvr, ns)] = denied
	}
}

func (a *fakeAccess) check(_ context.Context, verb string, gvr schema.GroupVersionResource, ns string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return false, errors.New("authorization API unavailable")
	}
	return !a.denied[accessKey(verb, gvr, ns)], nil
}

// changes records HealthChanges.
type changes struct {
	mu  sync.Mutex
	all []HealthChange
}

func (c *changes) add(h HealthChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, h)
}

func (c *changes) list() []HealthChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]HealthChange(nil), c.all...)
}

// degradedGauges returns restart_controller_kind_degraded as
// "resource|namespace|reason" -> value.
func (f *fixture) degradedGauges(t *testing.T) map[string]float64 {
	return f.gauges(t, "restart_controller_kind_degraded", "resource", "namespace", "reason")
}

// forbidList makes the fake API server refuse to list the resource while
// the returned flag is set, as RBAC does.
func forbidList(f *fixture, gvr schema.GroupVersionResource) *atomic.Bool {
	var on atomic.Bool
	on.Store(true)
	f.dyn.PrependReactor("list", gvr.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		if on.Load() {
			return true, nil, apierrors.NewForbidden(gvr.GroupResource(), "", errors.New(`User "system:serviceaccount:restart-controller:restart-controller" cannot list resource`))
		}
		return false, nil, nil
	})
	return &on
}

// slowly polls for longer than eventually: a reflector retries a failed
// list after a backoff of about a second, and longer after several.
func slowly(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The heart of "degrades, never stalls": a workload kind the controller may
// not list or watch is reported at once (log naming kind and verbs, metric,
// HealthChange, readiness note), every other kind syncs and works, and the
// kind joins when access is granted, clearing every trace.
func TestForbiddenWorkloadKindDegradesWithoutStallingTheRest(t *testing.T) {
	for _, withReview := range []bool{true, false} {
		t.Run(fmt.Sprintf("access review %v", withReview), func(t *testing.T) {
			cfg := exampleConfig(t)
			web := catalog.WorkloadKey{Resource: deployments, Namespace: "shop", Name: "web"}
			agent := catalog.WorkloadKey{Resource: daemonSets, Namespace: "shop", Name: "agent"}
			f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1),
				configMapObject("shop", "app", map[string]interface{}{"k": "v"}),
				workload(cfg, deployments, "Deployment", "shop", "web", "app"),
				workload(cfg, daemonSets, "DaemonSet", "shop", "agent", "app"))
			forbidden := forbidList(f, daemonSets)
			access := &fakeAccess{}
			access.set(true, daemonSets, "", "list", "watch")
			seen := &changes{}
			var checker AccessChecker
			if withReview {
				checker = access.check
			}
			f.w.Access, f.w.Health = checker, seen.add
			f.start(t)
			f.waitForSync(t) // would time out if the forbidden kind were waited for

			if !f.rec.sawWorkload(web) {
				t.Fatal("the permitted kind's workload was not handed on")
			}
			if err := f.w.Ready(); err != nil {
				t.Fatalf("not ready with one kind degraded: %v", err)
			}
			degraded := f.w.Degraded()
			if len(degraded) != 1 || degraded[0].Resource != daemonSets || degraded[0].Reason != ReasonForbidden ||
				degraded[0].Role != RoleWorkload || degraded[0].Namespace != "" {
				t.Fatalf("Degraded() = %+v, want daemonsets forbidden", degraded)
			}
			if withReview && !slices.Equal(degraded[0].MissingVerbs, []string{"list", "watch"}) {
				t.Fatalf("missing verbs %v, want [list watch]", degraded[0].MissingVerbs)
			}
			key := daemonSets.String() + "||" + ReasonForbidden
			if got := f.degradedGauges(t); !equalGauges(got, map[string]float64{key: 1}) {
				t.Fatalf("kind_degraded = %v, want %s = 1", got, key)
			}
			if got := f.watched(t); got[daemonSets.String()] != 0 || got[deployments.String()] != 1 {
				t.Fatalf("workload_kind_watched = %v: daemonsets must say 0, deployments 1", got)
			}
			logged := f.log.String()
			for _, want := range []string{"[ERROR]", "kind degraded", daemonSets.String(), "reason=forbidden"} {
				if !strings.Contains(logged, want) {
					t.Fatalf("the log does not say %q:\n%s", want, logged)
				}
			}
			if withReview && !strings.Contains(logged, `missing_verbs="list,watch"`) {
				t.Fatalf("the log does not name the missing verbs:\n%s", logged)
			}
			if n := f.log.count("kind degraded"); n != 1 {
				t.Fatalf("%d degraded lines, want 1 (retries are quiet):\n%s", n, logged)
			}
			note, err := f.w.Readiness()
			if err != nil || !strings.Contains(note, "degraded: 1") || !strings.Contains(note, daemonSets.String()) ||
				!strings.Contains(note, "forbidden") {
				t.Fatalf("Readiness() = %q, %v; want ready with a note naming daemonsets", note, err)
			}
			if ch := seen.list(); len(ch) != 1 || ch[0].Recovered || ch[0].Resource != daemonSets {
				t.Fatalf("health changes %+v, want one: daemonsets degraded", ch)
			}
			if f.rec.sawWorkload(agent) {
				t.Fatal("a workload of the forbidden kind was handed on")
			}

			// RBAC is fixed: the informer's retries succeed, the kind joins.
			access.set(false, daemonSets, "", "list", "watch")
			forbidden.Store(false)
			slowly(t, "the forbidden kind's workload is seen", func() bool { return f.rec.sawWorkload(agent) })
			slowly(t, "the degraded mark clears", func() bool { return len(f.w.Degraded()) == 0 })
			if got := f.degradedGauges(t); len(got) != 0 {
				t.Fatalf("kind_degraded = %v after recovery, want no series", got)
			}
			if got := f.watched(t); got[daemonSets.String()] != 1 {
				t.Fatalf("workload_kind_watched = %v after recovery", got)
			}
			if note, err := f.w.Readiness(); err != nil || note != "" {
				t.Fatalf("Readiness() = %q, %v after recovery", note, err)
			}
			ch := seen.list()
			if len(ch) != 2 || !ch[1].Recovered || ch[1].Resource != daemonSets {
				t.Fatalf("health changes %+v, want degraded then recovered", ch)
			}
			if !strings.Contains(f.log.String(), "kind recovered") {
				t.Fatalf("no recovery logged:\n%s", f.log)
			}
		})
	}
}

// Sources degrade too: Secrets forbidden leave ConfigMaps and workloads
// working; when Secrets join, every workload is compared again, since
// changes made while they were not watched raised no event.
func TestForbiddenSourceKindDegradesAndRequeuesWorkloadsOnRecovery(t *testing.T) {
	cfg := exampleConfig(t)
	web := catalog.WorkloadKey{Resource: deployments, Namespace: "shop", Name: "web"}
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1),
		configMapObject("shop", "app", map[string]interface{}{"k": "v"}),
		workload(cfg, deployments, "Deployment", "shop", "web", "app"))
	forbidden := forbidList(f, secrets)
	f.start(t)
	f.waitForSync(t)
	degraded := f.w.Degraded()
	if len(degraded) != 1 || degraded[0].Resource != secrets || degraded[0].Role != RoleSource {
		t.Fatalf("Degraded() = %+v, want the secret source kind", degraded)
	}
	if _, ok := f.cat.Source(catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}); !ok {
		t.Fatal("ConfigMaps are not cached while Secrets are forbidden")
	}
	keysBefore := countKey(f.rec, web)

	forbidden.Store(false)
	slowly(t, "secrets recover", func() bool { return len(f.w.Degraded()) == 0 })
	slowly(t, "the workload is compared again", func() bool { return countKey(f.rec, web) > keysBefore })
}

func countKey(r *syncRecorder, key catalog.WorkloadKey) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.workloads {
		if k == key {
			n++
		}
	}
	return n
}

// A kind that may be listed but not watched keeps being listed again after
// every failed watch; that is no recovery, and must not flap.
func TestListButNoWatchStaysDegradedWithoutFlapping(t *testing.T) {
	cfg := exampleConfig(t)
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1))
	var forbidden atomic.Bool
	var refused atomic.Int32
	forbidden.Store(true)
	f.dyn.PrependWatchReactor("statefulsets", func(clienttesting.Action) (bool, watch.Interface, error) {
		if forbidden.Load() {
			refused.Add(1)
			return true, nil, apierrors.NewForbidden(statefulSets.GroupResource(), "", errors.New("cannot watch"))
		}
		return false, nil, nil
	})
	access := &fakeAccess{}
	access.set(true, statefulSets, "", "watch")
	seen := &changes{}
	f.w.Access, f.w.Health = access.check, seen.add
	f.start(t)
	f.waitForSync(t)
	if d := f.w.Degraded(); len(d) != 1 || !slices.Equal(d[0].MissingVerbs, []string{"watch"}) {
		t.Fatalf("Degraded() = %+v, want statefulsets missing watch", d)
	}
	// Several list-then-fail cycles of the reflector.
	atStart := refused.Load()
	slowly(t, "two more refused watches", func() bool { return refused.Load() >= atStart+2 })
	if ch := seen.list(); len(ch) != 1 {
		t.Fatalf("%d health changes while nothing changed, want 1: %+v", len(ch), ch)
	}
	access.set(false, statefulSets, "", "watch")
	forbidden.Store(false)
	slowly(t, "statefulsets recover", func() bool { return len(f.w.Degraded()) == 0 })
}

// A workload kind that may be watched but not patched is watched (and waited
// for) but reported: its workloads cannot be restarted.
func TestPatchForbiddenIsReportedButWatched(t *testing.T) {
	cfg := exampleConfig(t)
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1),
		workload(cfg, statefulSets, "StatefulSet", "shop", "db", "app"))
	access := &fakeAccess{}
	access.set(true, statefulSets, "", "patch")
	f.w.Access, f.w.Health = access.check, nil
	f.start(t)
	f.waitForSync(t)
	if !f.rec.sawWorkload(catalog.WorkloadKey{Resource: statefulSets, Namespace: "shop", Name: "db"}) {
		t.Fatal("a kind that may not be patched is not watched")
	}
	d := f.w.Degraded()
	if len(d) != 1 || d[0].Reason != ReasonPatchForbidden || d[0].Resource != statefulSets {
		t.Fatalf("Degraded() = %+v, want statefulsets patch_forbidden", d)
	}
	if f.watched(t)[statefulSets.String()] != 1 {
		t.Fatal("a kind that may not be patched is reported unwatched")
	}
	if !strings.Contains(f.log.String(), "missing_verbs=patch") {
		t.Fatalf("the log does not name patch:\n%s", f.log)
	}
	access.set(false, statefulSets, "", "patch")
	slowly(t, "the patch mark clears", func() bool { return len(f.w.Degraded()) == 0 })
}

// A kind whose resource vanishes (CRD deleted) is degraded as not_found.
func TestNotFoundKindDegrades(t *testing.T) {
	cfg := exampleConfig(t)
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1))
	var gone atomic.Bool
	gone.Store(true)
	f.dyn.PrependReactor("list", "rollouts", func(clienttesting.Action) (bool, runtime.Object, error) {
		if gone.Load() {
			return true, nil, apierrors.NewNotFound(rollouts.GroupResource(), "")
		}
		return false, nil, nil
	})
	f.start(t)
	f.waitForSync(t)
	if d := f.w.Degraded(); len(d) != 1 || d[0].Reason != ReasonNotFound || d[0].Resource != rollouts {
		t.Fatalf("Degraded() = %+v, want rollouts not_found", d)
	}
	gone.Store(false)
	slowly(t, "rollouts recover", func() bool { return len(f.w.Degraded()) == 0 })
}

// Namespaced installs: only the namespace without a RoleBinding degrades.
func TestForbiddenNamespaceDegradesAlone(t *testing.T) {
	cfg := parseConfig(t, "namespaces: [shop, blog]\n")
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1),
		workload(cfg, deployments, "Deployment", "shop", "web", "app"))
	access := &fakeAccess{}
	for _, gvr := range []schema.GroupVersionResource{configMaps, secrets, deployments, statefulSets, daemonSets, rollouts} {
		access.set(true, gvr, "blog", "list", "watch", "patch")
	}
	f.dyn.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "blog" {
			return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New("no RoleBinding"))
		}
		return false, nil, nil
	})
	f.w.Access, f.w.Health = access.check, nil
	f.start(t)
	f.waitForSync(t)
	if !f.rec.sawWorkload(catalog.WorkloadKey{Resource: deployments, Namespace: "shop", Name: "web"}) {
		t.Fatal("the permitted namespace is not watched")
	}
	d := f.w.Degraded()
	if len(d) != 6 { // every kind, once: missing patch is folded into forbidden
		t.Fatalf("%d degradations, want 6: %+v", len(d), d)
	}
	for _, x := range d {
		want := []string{"list", "watch"}
		if x.Role == RoleWorkload {
			want = append(want, "patch")
		}
		if x.Namespace != "blog" || x.Reason != ReasonForbidden || !slices.Equal(x.MissingVerbs, want) {
			t.Fatalf("degradation %+v, want in blog, forbidden, missing %v", x, want)
		}
	}
	if got := f.degradedGauges(t)[deployments.String()+"|blog|forbidden"]; got != 1 {
		t.Fatalf("kind_degraded{deployments, blog, forbidden} = %v", got)
	}
}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	cases := []struct {
		err  error
		want string
	}{
		{apierrors.NewForbidden(gr, "", errors.New("rbac")), ReasonForbidden},
		{fmt.Errorf("failed to list: %w", apierrors.NewForbidden(gr, "", errors.New("rbac"))), ReasonForbidden},
		{apierrors.NewNotFound(gr, ""), ReasonNotFound},
		{apierrors.NewServiceUnavailable("later"), ""},
		{apierrors.NewUnauthorized("token expired"), ""},
		{errors.New("connection refused"), ""},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// A resource a served built-in group-version does not serve is a typo: Start
// fails with a ConfigError naming every such place, and watches nothing.
// Outside built-in groups it is a CRD not installed yet (discovery_test.go).
func TestStartRejectsUnknownResourcesOfBuiltinGroups(t *testing.T) {
	cfg := parseConfig(t, `
sources:
  - {name: configmap, group: "", version: v1, resource: configmapz, dataFields: [data]}
workloads:
  - {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
  - {group: apps, version: v1, resource: deploymnets, podTemplatePath: spec.template}
  - {group: argoproj.io, version: v1alpha1, resource: rollouts, podTemplatePath: spec.template}
  - {group: batch, version: v1, resource: cronjobs, podTemplatePath: spec.jobTemplate.spec.template}
references:
  - {source: configmap, from: ["volumes[*].configMap"], name: name}
`)
	batchV1 := resourceList("batch/v1", resource("jobs", "Job"), resource("cronjobs", "CronJob"), resource("cronjobs/status", "CronJob"))
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1, batchV1))
	err := f.startErr()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Start = %v, want a *ConfigError", err)
	}
	if len(ce.Problems) != 2 {
		t.Fatalf("problems %q, want 2", ce.Problems)
	}
	for i, want := range [][]string{
		{"sources[0]", `"configmapz"`, "built-in", "v1 serves: configmaps, secrets"},
		{"workloads[1]", `"deploymnets"`, "built-in", "daemonsets, deployments, statefulsets"},
	} {
		for _, w := range want {
			if !strings.Contains(ce.Problems[i], w) {
				t.Errorf("problem %q does not say %q", ce.Problems[i], w)
			}
		}
	}
	if len(f.dyn.Actions()) != 0 {
		t.Fatalf("something was listed before the configuration was checked: %v", f.dyn.Actions())
	}
}

// A kind denied every verb is one degradation (forbidden, missing list,
// watch, patch); once list and watch are granted but patch is not, it is
// watched and degraded as patch_forbidden instead.
func TestForbiddenThenPatchForbidden(t *testing.T) {
	cfg := exampleConfig(t)
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1))
	forbidden := forbidList(f, daemonSets)
	access := &fakeAccess{}
	access.set(true, daemonSets, "", "list", "watch", "patch")
	f.w.Access, f.w.Health = access.check, nil
	f.start(t)
	f.waitForSync(t)
	d := f.w.Degraded()
	if len(d) != 1 || d[0].Reason != ReasonForbidden || !slices.Equal(d[0].MissingVerbs, []string{"list", "watch", "patch"}) {
		t.Fatalf("Degraded() = %+v, want one forbidden missing list, watch, patch", d)
	}
	access.set(false, daemonSets, "", "list", "watch")
	forbidden.Store(false)
	slowly(t, "forbidden becomes patch_forbidden", func() bool {
		d := f.w.Degraded()
		return len(d) == 1 && d[0].Reason == ReasonPatchForbidden
	})
	if got := f.degradedGauges(t); !equalGauges(got, map[string]float64{daemonSets.String() + "||" + ReasonPatchForbidden: 1}) {
		t.Fatalf("kind_degraded = %v, want only patch_forbidden", got)
	}
	if f.watched(t)[daemonSets.String()] != 1 {
		t.Fatal("daemonsets not reported watched once listed")
	}
	access.set(false, daemonSets, "", "patch")
	slowly(t, "every mark clears", func() bool { return len(f.w.Degraded()) == 0 })
}
