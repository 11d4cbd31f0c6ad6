package watch

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

const notServedWarning = "workload kind is not served"

// A workload kind whose CRD is not installed yet does not stop the others:
// it is reported missing, and Run starts watching it once discovery lists it.
func TestLateWorkloadKindIsWatchedOnceServed(t *testing.T) {
	cases := []struct {
		name    string
		missing *metav1.APIResourceList // what discovery says of argoproj.io/v1alpha1 at first; nil: NotFound
	}{
		{"group-version not served", nil},
		{"group-version served without the resource", resourceList("argoproj.io/v1alpha1", resource("analysisruns", "AnalysisRun"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := exampleConfig(t)
			disc := newFakeDiscovery(coreV1, appsV1, batchV1)
			if c.missing != nil {
				disc.serve(c.missing)
			}
			source := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
			web := catalog.WorkloadKey{Resource: deployments, Namespace: "shop", Name: "web"}
			canary := catalog.WorkloadKey{Resource: rollouts, Namespace: "shop", Name: "canary"}
			f := newFixture(t, cfg, nil, disc,
				configMapObject("shop", "app", map[string]interface{}{"k": "v"}),
				workload(cfg, deployments, "Deployment", "shop", "web", "app"),
				workload(cfg, rollouts, "Rollout", "shop", "canary", "app"),
			)
			f.start(t)
			f.waitForSync(t)

			cronJobs := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}
			want := map[string]float64{deployments.String(): 1, statefulSets.String(): 1, daemonSets.String(): 1, rollouts.String(): 0, cronJobs.String(): 1}
			if got := f.watched(t); !equalGauges(got, want) {
				t.Fatalf("workload_kind_watched = %v, want %v", got, want)
			}
			if _, ok := f.cat.Workload(web); !ok {
				t.Fatal("the served kind's workload is not in the catalog")
			}
			if !f.rec.sawWorkload(web) {
				t.Fatal("no key for the served kind's workload")
			}
			if _, ok := f.cat.Source(source); !ok {
				t.Fatal("the source is not in the catalog")
			}
			if f.listed(rollouts) {
				t.Fatal("the missing kind was listed")
			}

			// Run keeps looking, quietly: one warning, not one per look.
			go f.w.Run(f.ctx)
			eventually(t, "Run looked for the missing kind twice", func() bool { return disc.lookups(rollouts.GroupVersion().String()) >= 3 })
			if n := f.log.count(notServedWarning); n != 1 {
				t.Fatalf("%d not-served warnings, want 1:\n%s", n, f.log)
			}
			if f.watched(t)[rollouts.String()] != 0 || f.rec.sawWorkloadOf(rollouts) {
				t.Fatal("the missing kind is watched before it is served")
			}

			// The CRD is installed.
			disc.serve(argoV1alpha1)
			eventually(t, "the late kind is reported watched", func() bool { return f.watched(t)[rollouts.String()] == 1 })
			eventually(t, "the late kind's workload reaches the catalog", func() bool { _, ok := f.cat.Workload(canary); return ok })
			eventually(t, "the handler receives the late kind's key", func() bool { return f.rec.sawWorkload(canary) })
			state, _ := f.cat.Workload(canary)
			if !state.OptedIn || len(state.References) != 1 || state.References[0].ID != source {
				t.Fatalf("late workload not reduced: %+v", state)
			}
			if got := f.cat.WorkloadsReading(source); !containsKeys(got, web, canary) {
				t.Fatalf("WorkloadsReading(%v) = %v, want %v and %v", source, got, web, canary)
			}
			f.w.mu.Lock()
			stillMissing := len(f.w.missing)
			f.w.mu.Unlock()
			if stillMissing != 0 {
				t.Fatalf("%d kind(s) still looked for after the kind was watched", stillMissing)
			}

			// Watched, not just listed: a new object of the kind is seen.
			blue := workload(cfg, rollouts, "Rollout", "shop", "blue", "app")
			if _, err := f.dyn.Resource(rollouts).Namespace("shop").Create(f.ctx, blue, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "a rollout created later is seen", func() bool {
				return f.rec.sawWorkload(catalog.WorkloadKey{Resource: rollouts, Namespace: "shop", Name: "blue"})
			})
			eventually(t, "ready with the late informer synced", func() bool { return f.w.Ready() == nil })
		})
	}
}

// Discovery failing (the API server briefly unavailable, an aggregated API
// down) is not an answer: Run logs it and asks again.
func TestRunRetriesDiscoveryErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}
	cases := []struct {
		name string
		err  error
	}{
		{"service unavailable", apierrors.NewServiceUnavailable("try later")},
		{"forbidden", apierrors.NewForbidden(gr, "", errors.New("RBAC not updated yet"))},
		{"connection error", errors.New("dial tcp 10.0.0.1:443: connect: connection refused")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := exampleConfig(t)
			disc := newFakeDiscovery(coreV1, appsV1, batchV1)
			canary := catalog.WorkloadKey{Resource: rollouts, Namespace: "shop", Name: "canary"}
			f := newFixture(t, cfg, nil, disc, workload(cfg, rollouts, "Rollout", "shop", "canary", "app"))
			f.start(t)
			f.waitForSync(t)

			gv := rollouts.GroupVersion().String()
			disc.failNext(gv, c.err, c.err)
			disc.serve(argoV1alpha1)
			go f.w.Run(f.ctx)

			eventually(t, "the kind is watched after the errors", func() bool { return f.watched(t)[rollouts.String()] == 1 })
			eventually(t, "the kind's workload is seen", func() bool { return f.rec.sawWorkload(canary) })
			if n := disc.lookups(gv); n < 4 {
				t.Fatalf("%d lookups, want 1 at start, 2 failed and 1 answered", n)
			}
			if n := f.log.count("[ERROR] looking up workload kind"); n != 2 {
				t.Fatalf("%d errors logged, want 2:\n%s", n, f.log)
			}
			if !strings.Contains(f.log.String(), c.err.Error()) {
				t.Fatalf("the discovery error is not logged:\n%s", f.log)
			}
		})
	}
}

// A workload kind whose lookup fails at start does not stop the others: Start
// succeeds, the kind is reported unwatched, and Run picks it up later.
func TestStartKeepsGoingWhenAWorkloadKindLookupFails(t *testing.T) {
	cfg := exampleConfig(t)
	disc := newFakeDiscovery(coreV1, appsV1, argoV1alpha1)
	disc.failNext("apps/v1", apierrors.NewServiceUnavailable("try later"))
	f := newFixture(t, cfg, nil, disc)
	if err := f.startErr(); err != nil {
		t.Fatalf("Start failed on one workload kind's lookup: %v", err)
	}
	if got := f.watched(t); got[deployments.String()] != 0 || got[rollouts.String()] != 1 {
		t.Fatalf("watched gauges %v: deployments should wait, rollouts be watched", got)
	}
	go f.w.Run(f.ctx)
	eventually(t, "deployments watched once discovery answers", func() bool { return f.watched(t)[deployments.String()] == 1 })
}

func TestStartFailsUnlessEverySourceIsServed(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("try later")
	cases := []struct {
		name    string
		served  []*metav1.APIResourceList
		failGV  string // a group-version whose first lookup fails with unavailable
		wantErr []string
	}{
		{
			name:    "source group-version not served",
			served:  []*metav1.APIResourceList{appsV1, argoV1alpha1},
			wantErr: []string{"sources[0]", configMaps.String(), "not served"},
		},
		{
			name:    "source resource missing from its group-version",
			served:  []*metav1.APIResourceList{resourceList("v1", resource("configmaps", "ConfigMap")), appsV1, argoV1alpha1},
			wantErr: []string{"sources[1]", secrets.String(), "not served"},
		},
		{
			name:    "discovery fails for a source",
			served:  []*metav1.APIResourceList{coreV1, appsV1, argoV1alpha1},
			failGV:  "v1",
			wantErr: []string{"sources[0]", "looking up", "try later"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			disc := newFakeDiscovery(c.served...)
			if c.failGV != "" {
				disc.failNext(c.failGV, unavailable)
			}
			f := newFixture(t, exampleConfig(t), nil, disc)
			err := f.startErr()
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, want := range c.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if c.failGV != "" && !apierrors.IsServiceUnavailable(err) {
				t.Errorf("error %q does not wrap the discovery error", err)
			}
		})
	}
}

// Ready is what /readyz answers: false until WaitForSync has returned, even
// when every cache happens to be filled already, and false again while an
// informer started later (a CRD installed after start) has not synced.
func TestReadyFollowsEveryInformer(t *testing.T) {
	cfg := exampleConfig(t)
	disc := newFakeDiscovery(coreV1, appsV1, batchV1)
	f := newFixture(t, cfg, nil, disc,
		workload(cfg, deployments, "Deployment", "shop", "web", "app"),
		workload(cfg, rollouts, "Rollout", "shop", "canary", "app"))
	if f.w.Ready() == nil {
		t.Fatal("ready before Start")
	}
	f.start(t)
	eventually(t, "every informer has synced", func() bool {
		f.w.mu.Lock()
		defer f.w.mu.Unlock()
		for _, synced := range f.w.synced {
			if !synced() {
				return false
			}
		}
		return len(f.w.synced) > 0
	})
	if f.w.Ready() == nil {
		t.Fatal("ready before WaitForSync returned")
	}
	f.waitForSync(t)
	if err := f.w.Ready(); err != nil {
		t.Fatalf("not ready after WaitForSync: %v", err)
	}

	// The late kind's initial list is held up until gate closes.
	gate := make(chan struct{})
	f.dyn.PrependReactor("list", "rollouts", func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case <-gate:
		case <-f.ctx.Done():
		}
		return false, nil, nil // on to the tracker
	})
	disc.serve(argoV1alpha1)
	go f.w.Run(f.ctx)
	eventually(t, "the late informer is started", func() bool { return f.watched(t)[rollouts.String()] == 1 })
	if f.w.Ready() == nil {
		t.Fatal("ready while the late informer has not listed")
	}
	close(gate)
	eventually(t, "ready once the late informer has synced", func() bool { return f.w.Ready() == nil })
	if _, ok := f.cat.Workload(catalog.WorkloadKey{Resource: rollouts, Namespace: "shop", Name: "canary"}); !ok {
		t.Fatal("ready without the late kind's workload in the catalog")
	}
}

// WaitForSync gives up when its context ends, with the context's cause; the
// watcher then stays not ready, even once its caches fill: only a successful
// WaitForSync makes it ready.
func TestWaitForSyncGivesUpWithItsContext(t *testing.T) {
	cfg := exampleConfig(t)
	f := newFixture(t, cfg, nil, newFakeDiscovery(coreV1, appsV1, argoV1alpha1))
	// Deployments do not finish their initial list until gate closes.
	gate := make(chan struct{})
	f.dyn.PrependReactor("list", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case <-gate:
		case <-f.ctx.Done():
		}
		return false, nil, nil
	})
	f.start(t)
	cause := errors.New("start-up deadline")
	ctx, cancel := context.WithCancelCause(f.ctx)
	cancel(cause)
	if err := f.w.WaitForSync(ctx); !errors.Is(err, cause) {
		t.Fatalf("WaitForSync = %v, want an error wrapping %q", err, cause)
	}
	close(gate)
	eventually(t, "every informer has synced", func() bool {
		f.w.mu.Lock()
		defer f.w.mu.Unlock()
		for _, synced := range f.w.synced {
			if !synced() {
				return false
			}
		}
		return true
	})
	if f.w.Ready() == nil {
		t.Fatal("ready although WaitForSync failed")
	}
}

func equalGauges(got, want map[string]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

func containsKeys(keys []catalog.WorkloadKey, want ...catalog.WorkloadKey) bool {
	for _, w := range want {
		found := false
		for _, k := range keys {
			found = found || k == w
		}
		if !found {
			return false
		}
	}
	return true
}
