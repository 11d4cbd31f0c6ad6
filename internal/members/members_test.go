package members

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/refs"
)

var spcMembers = func() *refs.Members {
	m, err := refs.CompileMembers("status.secretProviderClassName", "status.objects[*]", "id", "version")
	if err != nil {
		panic(err)
	}
	return m
}()

// spcps is a SecretProviderClassPodStatus as the CSI driver writes it: of
// pod in namespace shop, for the SecretProviderClass spc, at a
// resourceVersion and generation, mounting one object at version.
func spcps(t *testing.T, pod, spc, rv string, generation int64, version string) *State {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "secrets-store.csi.x-k8s.io/v1",
		"kind":       "SecretProviderClassPodStatus",
		"status": map[string]interface{}{
			"podName": pod, "secretProviderClassName": spc, "mounted": true,
			"objects": []interface{}{map[string]interface{}{"id": "secret/db", "version": version}},
		},
	}}
	u.SetName(pod + "-shop-" + spc)
	u.SetNamespace("shop")
	u.SetResourceVersion(rv)
	u.SetGeneration(generation)
	out, err := Reduce(spcMembers)(u)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*State)
}

func TestReduce(t *testing.T) {
	a := spcps(t, "web-0", "vault", "10", 1, "v1")
	if a.Source != "vault" || a.Name != "web-0-shop-vault" || a.Namespace != "shop" || a.Updated() || len(a.Digests) != 1 || a.Digests[0].Key != "secret/db" {
		t.Fatalf("reduced %+v", a)
	}
	if b := spcps(t, "web-1", "vault", "11", 2, "v1"); !a.SameData(b) || !b.Updated() {
		t.Error("same versions are the same data; generation 2 is updated")
	}
	if b := spcps(t, "web-0", "vault", "12", 2, "v2"); a.SameData(b) {
		t.Error("another version is other data")
	}
	if out, _ := Reduce(spcMembers)(a); out != a {
		t.Error("an already reduced object does not pass through")
	}
}

// TestGroup: the value of a source of lifecycle updatesOnly, from its
// members.
func TestGroup(t *testing.T) {
	id := catalog.SourceID{Kind: "spc", Namespace: "shop", Name: "vault"}
	v1, v2 := spcps(t, "x", "vault", "1", 1, "v1").Digests, spcps(t, "x", "vault", "1", 1, "v2").Digests
	tests := []struct {
		name     string
		members  []*State
		want     checksum.Digests // nil: no source
		wantRV   string
		baseline bool
	}{
		{name: "no members: unknown"},
		{name: "members of another source or namespace only", members: []*State{
			spcps(t, "a", "other", "5", 2, "v1"),
			func() *State { m := spcps(t, "b", "vault", "6", 2, "v1"); m.Namespace = "elsewhere"; return m }(),
		}},
		{name: "created only: baseline, the member created last", members: []*State{
			spcps(t, "a", "vault", "10", 1, "v1"), spcps(t, "b", "vault", "12", 1, "v2"), spcps(t, "c", "vault", "11", 1, "v1"),
		}, want: v2, wantRV: "12", baseline: true},
		{name: "an updated member wins over members created after it", members: []*State{
			spcps(t, "a", "vault", "10", 2, "v1"), spcps(t, "b", "vault", "20", 1, "v2"),
		}, want: v1, wantRV: "10"},
		{name: "the updated member written last", members: []*State{
			spcps(t, "a", "vault", "9", 3, "v2"), spcps(t, "b", "vault", "30", 1, "v1"), spcps(t, "c", "vault", "8", 2, "v1"),
		}, want: v2, wantRV: "9"},
		{name: "resourceVersions compare as numbers", members: []*State{
			spcps(t, "a", "vault", "9", 2, "v1"), spcps(t, "b", "vault", "10", 2, "v2"),
		}, want: v2, wantRV: "10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whatever order the cache lists them in.
			for _, order := range [][]*State{tt.members, reversed(tt.members)} {
				got, ok := Group(id, order)
				if ok != (tt.want != nil) {
					t.Fatalf("found %v, want %v", ok, tt.want != nil)
				}
				if !ok {
					continue
				}
				if !slices.Equal(got.Digests, tt.want) || got.ResourceVersion != tt.wantRV || got.Baseline != tt.baseline ||
					got.Name != "vault" || got.Namespace != "shop" {
					t.Errorf("got %s rv %s baseline %v, want %v rv %s baseline %v", got.Name, got.ResourceVersion, got.Baseline, tt.want, tt.wantRV, tt.baseline)
				}
			}
		})
	}
}

func reversed(s []*State) []*State {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestCatalogMembers: the catalog serves a source of lifecycle updatesOnly
// from its members' caches, by the name they are members of, and names it
// for regex source lists.
func TestCatalogMembers(t *testing.T) {
	c := catalog.New()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers())
	stores := &Stores{}
	stores.Add(store)
	c.AddSourceGroups("spc", stores)
	for i, m := range []*State{
		spcps(t, "web-0", "vault", "10", 1, "v1"),
		spcps(t, "web-1", "vault", "11", 2, "v2"),
		spcps(t, "api-0", "other", "12", 1, "v1"),
		spcps(t, "api-1", "", "13", 1, "v1"), // not filled in yet
	} {
		if err := store.Add(m); err != nil {
			t.Fatalf("adding member %d: %v", i, err)
		}
	}
	id := catalog.SourceID{Kind: "spc", Namespace: "shop", Name: "vault"}
	s, ok := c.Source(id)
	if !ok || s.Baseline || s.ResourceVersion != "11" {
		t.Fatalf("Source(%s) = %+v, %v", id, s, ok)
	}
	if _, ok := c.Source(catalog.SourceID{Kind: "spc", Namespace: "shop", Name: "web-0-shop-vault"}); ok {
		t.Error("a member's own name names a source")
	}
	if got := fmt.Sprint(stores.Names("shop")); got != "[other vault]" {
		t.Errorf("source names %s", got)
	}
	if err := store.Delete(spcps(t, "web-1", "vault", "11", 2, "v2")); err != nil {
		t.Fatal(err)
	}
	if s, ok := c.Source(id); !ok || !s.Baseline {
		t.Errorf("with only a created member left: %+v, %v", s, ok)
	}
}
