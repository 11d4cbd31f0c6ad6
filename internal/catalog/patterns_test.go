package catalog

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"
)

// regexWorkload is a Deployment in namespace ns whose reload lists (the
// Reloader preset's, match: regex) hold cms and secrets, and whose pod spec
// reads the key a of the ConfigMap app-env (auto opts it in for that too).
func regexWorkload(ns, name, cms, secrets string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: ` + ns + `
  annotations: {reloader.stakater.com/auto: "true", configmap.reloader.stakater.com/reload: "` + cms + `", secret.reloader.stakater.com/reload: "` + secrets + `"}
spec:
  template:
    spec:
      containers:
      - name: c
        env: [{name: A, valueFrom: {configMapKeyRef: {name: app-env, key: a}}}]
`
}

// TestRegexListsMatchSourcesOfTheNamespace: entries of a regex list match
// whole names of the sources of their kind in the workload's namespace, as
// they exist when the workload is read; a bad entry is skipped and
// reported, the others still count; a source event finds the readers its
// name matches, and only those.
func TestRegexListsMatchSourcesOfTheNamespace(t *testing.T) {
	cfg := presetConfig(t, "reloader")
	cat := New()
	cms := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	cat.AddSourceStore("configmap", cms)
	cat.AddSourceStore("secret", secrets)
	deploys := cat.IndexedStore(deployments, cache.NewIndexer(cache.MetaNamespaceKeyFunc, WorkloadIndexers()))
	cat.AddWorkloadStore(deployments, deploys)
	addSource := func(store cache.Indexer, kind, ns, name string) {
		t.Helper()
		obj, err := ReduceSource([]string{"data"})(fromYAML(t, "apiVersion: v1\nkind: "+kind+"\nmetadata: {name: "+name+", namespace: "+ns+"}\ndata: {a: '1'}"))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	addSource(cms, "ConfigMap", "shop", "app-env")
	addSource(cms, "ConfigMap", "shop", "app-1")
	addSource(cms, "ConfigMap", "shop", "xapp-1")
	addSource(cms, "ConfigMap", "other", "app-2")
	addSource(secrets, "Secret", "shop", "app-1")

	w := reduceWorkloadOf(t, cfg, fromYAML(t, regexWorkload("shop", "web", "app-.*, a[, ", "nothing-matches")))
	if err := deploys.Add(w); err != nil {
		t.Fatal(err)
	}
	if !w.OptedIn {
		t.Fatal("a regex reload list did not opt in")
	}
	if want := []string{`configmap.reloader.stakater.com/reload: entry "a[" is not a regular expression, skipped: error parsing regexp: missing closing ]: ` + "`[)$`"}; !reflect.DeepEqual(w.ListProblems, want) {
		t.Errorf("problems\n%q\nwant\n%q", w.ListProblems, want)
	}
	if got := describeRefs(w); got != "configmap/shop/app-env[a]" {
		t.Errorf("the cache resolved patterns into references: %s", got)
	}
	key := WorkloadKey{deployments, "shop", "web"}
	read, _ := cat.Workload(key)
	if got, want := describeRefs(read), "configmap/shop/app-1? configmap/shop/app-env"; got != want {
		t.Errorf("read as\n%s\nwant\n%s (the pod spec's reference read whole and kept required)", got, want)
	}
	// A source created later is matched at the next read, and its event
	// finds the workload; one its patterns do not match does not.
	addSource(cms, "ConfigMap", "shop", "app-new")
	read, _ = cat.Workload(key)
	if !strings.Contains(describeRefs(read), "configmap/shop/app-new?") {
		t.Errorf("a new matching source is not read: %s", describeRefs(read))
	}
	for id, want := range map[SourceID]bool{
		{"configmap", "shop", "app-new"}: true,
		{"configmap", "shop", "app-env"}: true,
		{"configmap", "shop", "xapp-1"}:  false, // anchored: the whole name
		{"configmap", "other", "app-2"}:  false, // another namespace
		{"secret", "shop", "app-1"}:      false, // another kind's list
	} {
		if got := len(cat.WorkloadsReading(id)) == 1; got != want {
			t.Errorf("%s: read %v, want %v (%v)", id, got, want, cat.WorkloadsReading(id))
		}
	}
	// Changed patterns move the index; a deleted workload leaves it.
	w2 := reduceWorkloadOf(t, cfg, fromYAML(t, regexWorkload("shop", "web", "xapp-.*", "")))
	if err := deploys.Update(w2); err != nil {
		t.Fatal(err)
	}
	if got := cat.WorkloadsReading(SourceID{"configmap", "shop", "app-new"}); len(got) != 0 {
		t.Errorf("old pattern still indexed: %v", got)
	}
	if got := cat.WorkloadsReading(SourceID{"configmap", "shop", "xapp-1"}); len(got) != 1 {
		t.Errorf("new pattern not indexed: %v", got)
	}
	if err := deploys.Delete(w2); err != nil {
		t.Fatal(err)
	}
	if n := len(cat.readers.patterns); n != 0 {
		t.Errorf("%d pattern places still indexed after the workload is gone", n)
	}
}

// TestExactListsStayExact: without match: regex, an entry is a name, and
// the default configuration adds no namespace index to source caches.
func TestExactListsStayExact(t *testing.T) {
	cfg := presetConfig(t, "wave")
	u := fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, annotations: {wave.pusher.com/update-on-config-change: "true", wave.pusher.com/extra-configmaps: "app-.*"}}
spec: {template: {spec: {containers: [{name: c}]}}}
`)
	w := reduceWorkloadOf(t, cfg, u)
	if got := describeRefs(w); got != "configmap/shop/app-.*?" {
		t.Errorf("references %s", got)
	}
	if len(w.Patterns) != 0 || len(w.ListProblems) != 0 {
		t.Errorf("patterns %v, problems %v", w.Patterns, w.ListProblems)
	}
	f := newCatalogFixture(t)
	f.cat.Workload(WorkloadKey{deployments, "shop", "web"})
	if _, indexed := f.configMaps.GetIndexers()[namespaceIndex]; indexed {
		t.Error("a source cache was indexed by namespace without any regex list")
	}
}

// The applied checksums record each pattern in force as "KIND/NS/~ENTRY"
// (decision.PatternKey): no source, even for a pattern that matches "~".
func TestRecordedPatternsAreNoSources(t *testing.T) {
	cfg := presetConfig(t, "reloader")
	w := reduceWorkloadOf(t, cfg, fromYAML(t, regexWorkload("shop", "web", ".*", "")))
	w.HasApplied, w.Applied = true, `{"configmap/shop/~.*":"pattern","configmap/shop/gone":"v3.00000000:0123456789abcdef"}`
	got := describeRefs(w.WithMatches(func(string) []string { return nil }))
	if want := "configmap/shop/app-env[a] configmap/shop/gone?"; got != want {
		t.Errorf("read as %s, want %s (the deleted match, never the pattern's record)", got, want)
	}
}
