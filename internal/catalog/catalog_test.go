package catalog

import (
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/checksum"
)

var statefulsets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}

// workloadYAML is a workload reading the ConfigMap "app" whole and the Secret "db" by key.
func workloadYAML(kind, ns, name string) string {
	return `
apiVersion: apps/v1
kind: ` + kind + `
metadata: {name: ` + name + `, namespace: ` + ns + `, annotations: {com.xing.deployment-restart: enabled}}
spec:
  template:
    spec:
      containers:
      - name: c
        envFrom: [{configMapRef: {name: app}}]
        env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]
`
}

type catalogFixture struct {
	cat        *Catalog
	configMaps cache.Indexer
	deploys    cache.Indexer
	stateful   cache.Indexer
}

func newCatalogFixture(t *testing.T) catalogFixture {
	t.Helper()
	cfg := exampleConfig(t)
	reduceCM := ReduceSource([]string{"data", "binaryData"})
	reduceSecret := ReduceSource([]string{"data"})
	reduceDeploy := ReduceWorkload(deploymentKind(t, cfg), cfg)

	f := catalogFixture{
		cat:        New(),
		configMaps: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		deploys:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, WorkloadIndexers()),
		stateful:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, WorkloadIndexers()),
	}
	// Secrets come from two stores, as when watching is limited to namespaces.
	secretsShop := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	secretsOther := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	f.cat.AddSourceStore("configmap", f.configMaps)
	f.cat.AddSourceStore("secret", secretsShop)
	f.cat.AddSourceStore("secret", secretsOther)
	f.deploys = f.cat.IndexedStore(deployments, f.deploys)
	f.stateful = f.cat.IndexedStore(statefulsets, f.stateful)
	f.cat.AddWorkloadStore(deployments, f.deploys)
	f.cat.AddWorkloadStore(statefulsets, f.stateful)

	add := func(store cache.Indexer, transform cache.TransformFunc, yamlText string) {
		t.Helper()
		obj, err := transform(fromYAML(t, yamlText))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(f.configMaps, reduceCM, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: '1'}")
	add(f.configMaps, reduceCM, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: other}\ndata: {a: '2'}")
	add(secretsShop, reduceSecret, "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\ndata: {password: cHc=}")
	add(secretsOther, reduceSecret, "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: other}\ndata: {password: eHg=}")

	add(f.deploys, reduceDeploy, workloadYAML("Deployment", "shop", "web"))
	add(f.deploys, reduceDeploy, workloadYAML("Deployment", "shop", "api"))
	add(f.deploys, reduceDeploy, workloadYAML("Deployment", "other", "web"))
	add(f.deploys, reduceDeploy, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: unrelated, namespace: shop}
spec: {template: {spec: {containers: [{name: c, envFrom: [{configMapRef: {name: not-app}}]}]}}}
`)
	add(f.stateful, reduceDeploy, workloadYAML("StatefulSet", "shop", "db"))
	return f
}

func TestCatalogSource(t *testing.T) {
	f := newCatalogFixture(t)
	cases := []struct {
		id     SourceID
		found  bool
		digest string // data key "a" or "password" expected value
	}{
		{SourceID{"configmap", "shop", "app"}, true, "1"},
		{SourceID{"configmap", "other", "app"}, true, "2"},
		{SourceID{"secret", "shop", "db"}, true, "cHc="},
		{SourceID{"secret", "other", "db"}, true, "eHg="}, // found in the second store
		{SourceID{"secret", "shop", "app"}, false, ""},    // a ConfigMap, not a Secret
		{SourceID{"configmap", "nowhere", "app"}, false, ""},
		{SourceID{"configmap", "shop", "missing"}, false, ""},
		{SourceID{"unknownkind", "shop", "app"}, false, ""},
		{SourceID{}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.id.String(), func(t *testing.T) {
			state, found := f.cat.Source(tc.id)
			if found != tc.found {
				t.Fatalf("found = %v, want %v", found, tc.found)
			}
			if !found {
				if state != nil {
					t.Errorf("state %+v for a missing config", state)
				}
				return
			}
			if state.Namespace != tc.id.Namespace || state.Name != tc.id.Name {
				t.Errorf("got %s/%s", state.Namespace, state.Name)
			}
			key := "a"
			if tc.id.Kind == "secret" {
				key = "password"
			}
			if d, _ := state.Digests.Get(key); d != checksum.DigestValue(tc.digest) {
				t.Errorf("wrong object returned: digests %v", state.Digests)
			}
		})
	}
}

func TestCatalogWorkload(t *testing.T) {
	f := newCatalogFixture(t)
	cases := []struct {
		key   WorkloadKey
		found bool
	}{
		{WorkloadKey{deployments, "shop", "web"}, true},
		{WorkloadKey{deployments, "other", "web"}, true},
		{WorkloadKey{statefulsets, "shop", "db"}, true},
		{WorkloadKey{statefulsets, "shop", "web"}, false}, // a Deployment, not a StatefulSet
		{WorkloadKey{deployments, "shop", "db"}, false},
		{WorkloadKey{schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}, "shop", "web"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.key.String(), func(t *testing.T) {
			w, found := f.cat.Workload(tc.key)
			if found != tc.found {
				t.Fatalf("found = %v, want %v", found, tc.found)
			}
			if found && (w.Namespace != tc.key.Namespace || w.Name != tc.key.Name || !w.OptedIn) {
				t.Errorf("got %+v", w)
			}
		})
	}
}

func sortKeys(keys []WorkloadKey) []WorkloadKey {
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

func TestCatalogWorkloadsReading(t *testing.T) {
	f := newCatalogFixture(t)
	cases := []struct {
		name string
		id   SourceID
		want []WorkloadKey
	}{
		{"configmap read by two deployments and a statefulset", SourceID{"configmap", "shop", "app"}, []WorkloadKey{
			{deployments, "shop", "api"}, {deployments, "shop", "web"}, {statefulsets, "shop", "db"},
		}},
		{"same name in another namespace matches only that namespace", SourceID{"configmap", "other", "app"}, []WorkloadKey{
			{deployments, "other", "web"},
		}},
		{"secret by key", SourceID{"secret", "shop", "db"}, []WorkloadKey{
			{deployments, "shop", "api"}, {deployments, "shop", "web"}, {statefulsets, "shop", "db"},
		}},
		{"same name, other kind", SourceID{"secret", "shop", "app"}, nil},
		{"namespace nobody is in", SourceID{"configmap", "nowhere", "app"}, nil},
		{"read by the unrelated deployment only", SourceID{"configmap", "shop", "not-app"}, []WorkloadKey{
			{deployments, "shop", "unrelated"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := sortKeys(f.cat.WorkloadsReading(tc.id))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	// Deleting a workload from its store removes it from the index.
	web, _ := f.cat.Workload(WorkloadKey{deployments, "shop", "web"})
	if err := f.deploys.Delete(web); err != nil {
		t.Fatal(err)
	}
	got := sortKeys(f.cat.WorkloadsReading(SourceID{"configmap", "shop", "app"}))
	want := []WorkloadKey{{deployments, "shop", "api"}, {statefulsets, "shop", "db"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after delete: got %v, want %v", got, want)
	}
}

func TestCatalogWorkloadsReadingFollowsWorkloadCached(t *testing.T) {
	cat := New()
	// The index answers from what WorkloadCached was told, not by reading
	// the stores.
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, WorkloadIndexers())
	cat.AddWorkloadStore(deployments, store)
	web := func(sources ...string) *WorkloadState {
		w := &WorkloadState{}
		w.Namespace, w.Name = "shop", "web"
		for _, s := range sources {
			w.References = append(w.References, Reference{ID: SourceID{"configmap", "shop", s}})
		}
		return w
	}
	reading := func(name string) []WorkloadKey { return cat.WorkloadsReading(SourceID{"configmap", "shop", name}) }
	if err := store.Add(web("app")); err != nil {
		t.Fatal(err)
	}
	if got := reading("app"); len(got) != 0 {
		t.Errorf("answered from the store: %v", got)
	}
	want := []WorkloadKey{{deployments, "shop", "web"}}
	cat.WorkloadCached(deployments, nil, web("app", "db"))
	if got := reading("app"); !reflect.DeepEqual(got, want) {
		t.Errorf("after add: %v", got)
	}
	cat.WorkloadCached(deployments, web("app", "db"), web("db", "extra"))
	if got := reading("app"); len(got) != 0 {
		t.Errorf("a reference dropped by an update still indexed: %v", got)
	}
	if got, got2 := reading("db"), reading("extra"); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got2, want) {
		t.Errorf("after update: %v, %v", got, got2)
	}
	// Another reader of the same source, of another kind, then deletions in
	// either order.
	other := web("db")
	other.Name = "worker"
	cat.WorkloadCached(statefulsets, nil, other)
	if got := sortKeys(reading("db")); !reflect.DeepEqual(got, []WorkloadKey{{deployments, "shop", "web"}, {statefulsets, "shop", "worker"}}) {
		t.Errorf("two readers: %v", got)
	}
	cat.WorkloadCached(deployments, web("db", "extra"), nil)
	if got := reading("db"); !reflect.DeepEqual(got, []WorkloadKey{{statefulsets, "shop", "worker"}}) {
		t.Errorf("after deleting the first reader: %v", got)
	}
	cat.WorkloadCached(statefulsets, other, nil)
	if n := len(cat.readers.first) + len(cat.readers.more); n != 0 {
		t.Errorf("%d sources still indexed after every reader is gone", n)
	}
}

// A source named in another namespace (a source-list annotation's
// NAMESPACE/NAME) finds its reader in the reader's own namespace.
func TestCatalogWorkloadsReadingAcrossNamespaces(t *testing.T) {
	cat := New()
	web := &WorkloadState{}
	web.Namespace, web.Name = "shop", "web"
	shared := SourceID{"configmap", "ops", "shared"}
	web.References = []Reference{{ID: SourceID{"configmap", "shop", "app"}}, {ID: shared}}
	cat.WorkloadCached(deployments, nil, web)
	cat.WorkloadCached(deployments, nil, web) // again: no duplicate
	want := []WorkloadKey{{deployments, "shop", "web"}}
	if got := cat.WorkloadsReading(shared); !reflect.DeepEqual(got, want) {
		t.Errorf("readers of %s: %v, want %v", shared, got, want)
	}
	cat.WorkloadCached(deployments, web, nil)
	if got := cat.WorkloadsReading(shared); len(got) != 0 || len(cat.readers.elsewhere) != 0 {
		t.Errorf("after deletion: %v, %d kept", got, len(cat.readers.elsewhere))
	}
}

// TestReaderIndexCostPerSource pins the memory of the index of readers:
// 30,000 sources read by one workload each must cost at most half of what
// the client-go index it replaced cost (a set per source: 15.6 MB of heap
// at that scale).
func TestReaderIndexCostPerSource(t *testing.T) {
	const workloads = 10000
	states := make([]*WorkloadState, workloads)
	for i := range states {
		w := &WorkloadState{}
		w.Namespace, w.Name = "ns", fmt.Sprintf("w-%05d", i)
		for k := range 3 {
			w.References = append(w.References, Reference{ID: SourceID{"configmap", "ns", fmt.Sprintf("s-%05d-%d", i, k)}})
		}
		states[i] = w
	}
	perSource := func(fill func() any) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		kept := fill()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(kept)
		return float64(after.HeapAlloc-before.HeapAlloc) / (3 * workloads)
	}
	index := perSource(func() any {
		cat := New()
		for _, w := range states {
			cat.WorkloadCached(deployments, nil, w)
		}
		return cat
	})
	clientGo := perSource(func() any {
		store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{"bySource": func(obj interface{}) ([]string, error) {
			var ids []string
			for _, r := range obj.(*WorkloadState).References {
				ids = append(ids, r.ID.String())
			}
			return ids, nil
		}})
		for _, w := range states {
			if err := store.Add(w); err != nil {
				t.Fatal(err)
			}
		}
		return store
	})
	t.Logf("%.0f bytes per source; a client-go index with its store: %.0f", index, clientGo)
	// The control: a set per source costs at least a map header and its
	// key, so a measure that sees nothing would be caught here.
	if clientGo < 64 {
		t.Fatalf("control: the client-go index measured %.0f bytes per source: the measure is off", clientGo)
	}
	if index > clientGo/2 {
		t.Errorf("the index costs %.0f bytes per source, want at most half of a client-go index's %.0f", index, clientGo)
	}
}

func TestCatalogCounts(t *testing.T) {
	f := newCatalogFixture(t)
	sources, workloads := f.cat.Counts()
	if sources != 4 || workloads != 5 {
		t.Errorf("Counts() = %d, %d; want 4, 5", sources, workloads)
	}
	if c, w := New().Counts(); c != 0 || w != 0 {
		t.Errorf("empty catalog counts %d, %d", c, w)
	}
}

func TestSourceIDAndWorkloadKeyStrings(t *testing.T) {
	if got := (SourceID{"configmap", "shop", "app"}).String(); got != "configmap/shop/app" {
		t.Errorf("SourceID.String() = %q", got)
	}
	if got := (WorkloadKey{deployments, "shop", "web"}).String(); got != "deployments.apps/shop/web" {
		t.Errorf("WorkloadKey.String() = %q", got)
	}
}

// What the caches keep of each object is sized on purpose: at 10,000
// workloads over 30,000 sources every byte of a state is about 0.3 MB of
// heap, and the allocator rounds a state up to its size class (144 and
// 416 bytes here; 160 or 448 would be the next). A field added to either
// state must be worth that, and this says so. (A SourceState is 136 bytes:
// 128 until Baseline, of sources of lifecycle updatesOnly, joined it.)
func TestReducedStateSizes(t *testing.T) {
	if n := unsafe.Sizeof(SourceState{}); n > 144 {
		t.Errorf("a SourceState is %d bytes, more than 144", n)
	}
	if n := unsafe.Sizeof(WorkloadState{}); n > 416 {
		t.Errorf("a WorkloadState is %d bytes, more than 416", n)
	}
}
