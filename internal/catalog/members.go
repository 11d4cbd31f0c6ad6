package catalog

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
)

// MemberState is what the cache keeps of an object of a source kind of
// lifecycle updatesOnly (config.Members): its identity, its generation, the
// source it is a member of, and one digest per item, never the items'
// values. The CSI driver's SecretProviderClassPodStatus of a pod is a member
// of the source named by its SecretProviderClass; its items are the
// mounted objects' versions.
type MemberState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	// Source is the name of the source the object is a member of; empty
	// while the object names none (then it is a member of nothing).
	Source string `json:"source"`
	// Digests digest each item's value, by the item's key.
	Digests Digests `json:"digests"`
}

// DeepCopyObject is required of cached objects; digests are never mutated
// in place.
func (m *MemberState) DeepCopyObject() runtime.Object {
	out := &MemberState{TypeMeta: m.TypeMeta, Source: m.Source}
	m.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if m.Digests != nil {
		out.Digests = slices.Clone(m.Digests)
	}
	return out
}

// Updated reports whether the object was written since its creation (its
// status rewritten: a rotation of a mounted object, or a remount). Its kind
// has no status subresource, so every write raises metadata.generation
// (the CSI driver's SecretProviderClassPodStatus CRD declares none).
func (m *MemberState) Updated() bool { return m.Generation > 1 }

// SameData reports whether two states of a member carry the same items.
func (m *MemberState) SameData(other *MemberState) bool {
	return slices.Equal(m.Digests, other.Digests)
}

// ReduceMember returns the informer transform of a kind of lifecycle
// updatesOnly: objects are reduced to MemberStates as they enter the cache.
// Tombstones and already reduced objects pass through.
func ReduceMember(members *config.Members) cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		state := &MemberState{
			TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
			ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
				ResourceVersion: u.GetResourceVersion(), Generation: u.GetGeneration()},
		}
		state.Source, _ = members.Name(u.Object)
		var b digestsBuilder
		members.Items(u.Object, func(key string, value interface{}) { b.set(key, checksum.DigestValue(value)) })
		state.Digests = b.done()
		return state, nil
	}
}

// MemberIndex is the index of a member cache by the source its objects are
// members of: "NAMESPACE/NAME".
const MemberIndex = "memberOf"

// MemberIndexers are the indexers every member informer must carry.
func MemberIndexers() cache.Indexers {
	return cache.Indexers{MemberIndex: func(obj interface{}) ([]string, error) {
		if m, ok := obj.(*MemberState); ok && m.Source != "" {
			return []string{m.Namespace + "/" + m.Source}, nil
		}
		return nil, nil
	}}
}

// AddMemberStore registers the cache of one source kind of lifecycle
// updatesOnly (one per watched namespace when watching is limited to
// namespaces); it must carry MemberIndexers.
func (c *Catalog) AddMemberStore(kind string, store cache.Indexer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members == nil {
		c.members = map[string][]cache.Indexer{}
	}
	c.members[kind] = append(c.members[kind], store)
}

// memberStores returns the caches of a kind of lifecycle updatesOnly;
// false for any other kind.
func (c *Catalog) memberStores(kind string) ([]cache.Indexer, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	stores, ok := c.members[kind]
	return stores, ok
}

// Members returns the cached members of a source of a kind of lifecycle
// updatesOnly.
func (c *Catalog) Members(id SourceID) []*MemberState {
	stores, _ := c.memberStores(id.Kind)
	var out []*MemberState
	for _, store := range stores {
		objs, err := store.ByIndex(MemberIndex, id.Namespace+"/"+id.Name)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			if m, ok := obj.(*MemberState); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// memberSourceNames returns the names of the sources of a kind of lifecycle
// updatesOnly that have members in a namespace; false for any other kind.
func (c *Catalog) memberSourceNames(kind, namespace string) ([]string, bool) {
	stores, ok := c.memberStores(kind)
	if !ok {
		return nil, false
	}
	var names []string
	for _, store := range stores {
		for _, v := range store.ListIndexFuncValues(MemberIndex) {
			if name, found := strings.CutPrefix(v, namespace+"/"); found {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), true
}

// Group is the state of a source of a kind of lifecycle updatesOnly, from
// its members; false when it has none (then the source is unknown, never
// absent: its members come and go with pods).
//
// Its value is level-triggered, read from the members alone, so a
// controller that restarts computes the same. If any member was updated
// since its creation (a rotation, or a remount), the source's data are
// those of the updated member written last (highest resourceVersion). If
// none was (only creations seen), the data are those of the member
// created last, and the state is a Baseline: decisions use it only to
// fill a record a workload does not have yet, never to restart and never
// to overwrite a record. A created member's data must not count as a
// change: pods created after a rotation at the provider mount the new
// version while older pods still run the old one, so restarting for it
// would loop (the restart creates members too), and recording it would
// hide the older pods' rotation to come.
func Group(id SourceID, members []*MemberState) (*SourceState, bool) {
	var chosen *MemberState
	updated := false
	for _, m := range members {
		switch {
		case m.Source != id.Name || m.Namespace != id.Namespace:
			continue
		case chosen == nil, m.Updated() && !updated:
		case m.Updated() == updated && writtenAfter(m, chosen):
		default:
			continue
		}
		chosen, updated = m, m.Updated()
	}
	if chosen == nil {
		return nil, false
	}
	return &SourceState{
		ObjectMeta: metav1.ObjectMeta{Name: id.Name, Namespace: id.Namespace, ResourceVersion: chosen.ResourceVersion},
		Digests:    chosen.Digests,
		Baseline:   !updated,
	}, true
}

// writtenAfter reports whether a was written after b: by resourceVersion,
// which orders writes within a resource; unparsable versions, and ties,
// fall back to the names, so that the choice never depends on the order
// the cache lists them in.
func writtenAfter(a, b *MemberState) bool {
	if c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion); err == nil && c != 0 {
		return c > 0
	}
	return a.Name > b.Name
}

// ChangedKeys returns, sorted, the keys of the items whose value differs
// between old and m (added and removed ones included).
func (m *MemberState) ChangedKeys(old *MemberState) []string {
	return (&SourceState{Digests: m.Digests}).ChangedKeys(&SourceState{Digests: old.Digests})
}
