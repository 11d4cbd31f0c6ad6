package watch

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/members"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

type membersRecorder struct {
	recorder
	members []catalog.SourceID
}

func (r *membersRecorder) SourceMembersChanged(id catalog.SourceID) {
	r.members = append(r.members, id)
}

func member(name, source string, generation int64, version byte) *members.State {
	m := &members.State{Source: source,
		Digests: checksum.DigestsOf(map[string]checksum.Digest{"secret/db": {version}})}
	m.Name, m.Namespace, m.Generation = name, "shop", generation
	return m
}

// TestMemberHandler: of the events of a source of lifecycle updatesOnly,
// only an update that changes a member's data is a change; creations,
// deletions and rewrites have the readers decided again, nothing more.
func TestMemberHandler(t *testing.T) {
	vault := catalog.SourceID{Kind: "spc", Namespace: "shop", Name: "vault"}
	other := catalog.SourceID{Kind: "spc", Namespace: "shop", Name: "other"}
	a1 := member("a-shop-vault", "vault", 1, 1)
	cases := []struct {
		name    string
		event   func(h cache.ResourceEventHandler)
		changed []catalog.SourceID
		members []catalog.SourceID
	}{
		{name: "initial list", event: func(h cache.ResourceEventHandler) { h.OnAdd(a1, true) }},
		{name: "created", event: func(h cache.ResourceEventHandler) { h.OnAdd(a1, false) }, members: []catalog.SourceID{vault}},
		{name: "created, naming no source yet", event: func(h cache.ResourceEventHandler) { h.OnAdd(member("x", "", 1, 1), false) }},
		{name: "deleted", event: func(h cache.ResourceEventHandler) { h.OnDelete(a1) }, members: []catalog.SourceID{vault}},
		{name: "deleted, tombstone", event: func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "shop/a-shop-vault", Obj: a1})
		}, members: []catalog.SourceID{vault}},
		{name: "rotated", event: func(h cache.ResourceEventHandler) { h.OnUpdate(a1, member("a-shop-vault", "vault", 2, 2)) },
			changed: []catalog.SourceID{vault}},
		{name: "remounted, same versions", event: func(h cache.ResourceEventHandler) { h.OnUpdate(a1, member("a-shop-vault", "vault", 2, 1)) },
			members: []catalog.SourceID{vault}},
		{name: "relisted unchanged", event: func(h cache.ResourceEventHandler) { h.OnUpdate(a1, a1) }},
		{name: "names another source", event: func(h cache.ResourceEventHandler) { h.OnUpdate(a1, member("a-shop-vault", "other", 2, 2)) },
			members: []catalog.SourceID{vault, other}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &membersRecorder{}
			c.event(memberHandler{kind: "spc", handler: rec, metrics: metrics.New(func() (int, int) { return 0, 0 })})
			if fmt.Sprint(rec.sources) != fmt.Sprint(c.changed) || !reflect.DeepEqual(rec.members, c.members) || len(rec.deleted)+len(rec.annotated) > 0 {
				t.Errorf("changed %v, members %v, deleted %v, annotated %v; want changed %v, members %v",
					rec.sources, rec.members, rec.deleted, rec.annotated, c.changed, c.members)
			}
		})
	}
}

var spcps = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasspodstatuses"}

// A source kind of lifecycle updatesOnly whose CRD is not installed does
// not stop the controller (its sources are unknown meanwhile), and is
// watched once discovery lists it, its objects grouped by the source they
// name.
func TestLateMemberKindIsWatchedOnceServed(t *testing.T) {
	cfg := parseConfig(t, `
sources:
- {name: configmap, version: v1, resource: configmaps, dataFields: [data]}
- name: spc
  group: secrets-store.csi.x-k8s.io
  version: v1
  resource: secretproviderclasspodstatuses
  lifecycle: updatesOnly
  nameFrom: status.secretProviderClassName
  items: {path: "status.objects[*]", key: id, value: version}
references:
- {source: spc, from: ["volumes[*].csi"], name: volumeAttributes.secretProviderClass}
`)
	status := &unstructured.Unstructured{Object: map[string]interface{}{
		"status": map[string]interface{}{"podName": "web-0", "secretProviderClassName": "vault",
			"objects": []interface{}{map[string]interface{}{"id": "secret/db", "version": "1"}}},
	}}
	status.SetAPIVersion("secrets-store.csi.x-k8s.io/v1")
	status.SetKind("SecretProviderClassPodStatus")
	status.SetNamespace("shop")
	status.SetName("web-0-shop-vault")
	disc := newFakeDiscovery(coreV1, appsV1, batchV1)
	f := newFixture(t, cfg, nil, disc, status)
	f.start(t)
	f.waitForSync(t)
	vault := catalog.SourceID{Kind: "spc", Namespace: "shop", Name: "vault"}
	if _, ok := f.cat.Source(vault); ok {
		t.Fatal("a source of a kind not served is in the catalog")
	}
	if n := f.log.count("source kind is not served"); n != 1 {
		t.Fatalf("%d not-served warnings, want 1:\n%s", n, f.log)
	}
	go f.w.Run(f.ctx)
	eventually(t, "Run looked for the missing kind", func() bool { return disc.lookups(spcps.GroupVersion().String()) >= 2 })
	if n := f.log.count("source kind is not served"); n != 1 {
		t.Fatalf("%d not-served warnings, want 1:\n%s", n, f.log)
	}
	disc.serve(resourceList("secrets-store.csi.x-k8s.io/v1", resource("secretproviderclasspodstatuses", "SecretProviderClassPodStatus")))
	eventually(t, "the late kind's source reaches the catalog", func() bool { _, ok := f.cat.Source(vault); return ok })
	eventually(t, "ready with the late informer synced", func() bool { return f.w.Ready() == nil })
	if s, _ := f.cat.Source(vault); !s.Baseline || len(s.Digests) != 1 {
		t.Errorf("source %+v", s)
	}
}
