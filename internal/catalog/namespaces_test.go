package catalog

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// With a namespaceSelector the API server applies, the workloads of a namespace missing from the
// selected namespaces' cache are not there for decisions, and appear as
// soon as their namespace is selected; WorkloadsIn finds them either way,
// for requeueing.
func TestWatchNamespacesSelectedByTheAPIServer(t *testing.T) {
	cat := New()
	indexers := WorkloadIndexers()
	for k, v := range NamespaceIndexers() {
		indexers[k] = v
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	cat.AddWorkloadStore(deployments, store)
	for _, ns := range []string{"shop", "lab"} {
		w := &WorkloadState{}
		w.Namespace, w.Name = ns, "web"
		if err := store.Add(w); err != nil {
			t.Fatal(err)
		}
	}
	shop, lab := WorkloadKey{deployments, "shop", "web"}, WorkloadKey{deployments, "lab", "web"}
	if _, ok := cat.Workload(lab); !ok || !cat.NamespaceSelected("lab") {
		t.Fatal("without a selection every namespace is selected")
	}

	selected := cache.NewStore(cache.MetaNamespaceKeyFunc)
	cat.WatchNamespaces(selected, labels.SelectorFromSet(labels.Set{"team": "shop"}), false)
	ns := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	if err := selected.Add(ns("shop")); err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.Workload(shop); !ok {
		t.Error("a workload of a selected namespace is hidden")
	}
	if _, ok := cat.Workload(lab); ok || cat.NamespaceSelected("lab") {
		t.Error("a workload of a namespace not selected is there")
	}
	if got, want := cat.WorkloadsIn("lab"), []WorkloadKey{lab}; !reflect.DeepEqual(got, want) {
		t.Errorf("WorkloadsIn(lab) = %v, want %v", got, want)
	}
	// Relabelled: lab in, shop out.
	if err := selected.Add(ns("lab")); err != nil {
		t.Fatal(err)
	}
	if err := selected.Delete(ns("shop")); err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.Workload(lab); !ok {
		t.Error("a namespace selected later still hides its workload")
	}
	if _, ok := cat.Workload(shop); ok {
		t.Error("a namespace no longer selected still shows its workload")
	}
}

// When restart windows read namespaces' labels, every namespace is cached
// with its labels, and a namespaceSelector is matched against them.
func TestWatchNamespacesByLabels(t *testing.T) {
	cat := New()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, WorkloadIndexers())
	cat.AddWorkloadStore(deployments, store)
	w := &WorkloadState{}
	w.Namespace, w.Name = "shop", "web"
	if err := store.Add(w); err != nil {
		t.Fatal(err)
	}
	if cat.NamespaceLabels("shop") != nil {
		t.Fatal("labels known before namespaces are watched")
	}
	namespaces := cache.NewStore(cache.MetaNamespaceKeyFunc)
	cat.WatchNamespaces(namespaces, labels.SelectorFromSet(labels.Set{"env": "prod"}), true)
	shop := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "dev", "window": "nights"}}}
	if err := namespaces.Add(shop); err != nil {
		t.Fatal(err)
	}
	if got := cat.NamespaceLabels("shop"); got == nil || got.Get("window") != "nights" {
		t.Errorf("labels %v, want the namespace's", got)
	}
	if _, ok := cat.Workload(WorkloadKey{deployments, "shop", "web"}); ok || cat.NamespaceSelected("shop") {
		t.Error("a namespace whose labels the selector does not match is selected")
	}
	shop = shop.DeepCopy()
	shop.Labels["env"] = "prod"
	if err := namespaces.Update(shop); err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.Workload(WorkloadKey{deployments, "shop", "web"}); !ok {
		t.Error("relabelled into the selection, its workload is still hidden")
	}
	if cat.NamespaceLabels("lab") != nil {
		t.Error("labels of a namespace that is not there")
	}
}
