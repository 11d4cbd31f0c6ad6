// Package members keeps the sources of kinds of lifecycle updatesOnly,
// whose objects another controller creates and deletes with each pod: the
// CSI Secrets Store driver's SecretProviderClassPodStatuses. Their objects
// are reduced to members as they enter the cache, indexed by the source
// they name, and each source's state is computed from its members
// (Group), level-triggered. The catalog reads them through
// catalog.SourceGroups.
package members

import (
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/objmeta"
	"github.com/restart-controller/restart-controller/internal/refs"
)

// State is what the cache keeps of an object of a source kind of
// lifecycle updatesOnly: its identity, its generation, the source it is a
// member of, and one digest per item, never the items' values. The CSI
// driver's SecretProviderClassPodStatus of a pod is a member of the source
// named by its SecretProviderClass; its items are the mounted objects'
// versions.
type State struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	// Source is the name of the source the object is a member of; empty
	// while the object names none (then it is a member of nothing).
	Source string `json:"source"`
	// Digests digest each item's value, by the item's key.
	Digests checksum.Digests `json:"digests"`
}

// DeepCopyObject is required of cached objects; digests are never mutated
// in place.
func (m *State) DeepCopyObject() runtime.Object {
	out := &State{TypeMeta: m.TypeMeta, Source: m.Source}
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
func (m *State) Updated() bool { return m.Generation > 1 }

// SameData reports whether two states of a member carry the same items.
func (m *State) SameData(other *State) bool { return slices.Equal(m.Digests, other.Digests) }

// ChangedKeys returns, sorted, the keys of the items whose value differs
// between old and m (added and removed ones included).
func (m *State) ChangedKeys(old *State) []string {
	return (&catalog.SourceState{Digests: m.Digests}).ChangedKeys(&catalog.SourceState{Digests: old.Digests})
}

// Reduce returns the informer transform of a kind of lifecycle
// updatesOnly: objects are reduced to States as they enter the cache.
// Tombstones and already reduced objects pass through.
func Reduce(members *refs.Members) cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		state := &State{
			TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
			ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
				ResourceVersion: u.GetResourceVersion(), Generation: u.GetGeneration()},
		}
		state.Source, _ = members.Name(u.Object)
		digests := map[string]checksum.Digest{}
		members.Items(u.Object, func(key string, value interface{}) { digests[key] = checksum.DigestValue(value) })
		state.Digests = checksum.DigestsOf(digests)
		return state, nil
	}
}

// Index is the index of a member cache by the source its objects are
// members of: "NAMESPACE/NAME".
const Index = "memberOf"

// Indexers are the indexers every member informer must carry.
func Indexers() cache.Indexers {
	return cache.Indexers{Index: func(obj interface{}) ([]string, error) {
		if m, ok := obj.(*State); ok && m.Source != "" {
			return []string{m.Namespace + "/" + m.Source}, nil
		}
		return nil, nil
	}}
}

// Stores are the caches of one kind of lifecycle updatesOnly (one per
// watched namespace), serving its sources to the catalog
// (catalog.SourceGroups). Stores join as their informers start.
type Stores struct {
	mu     sync.RWMutex
	stores []cache.Indexer
}

// Add registers the cache of one watched namespace; it must carry Indexers.
func (s *Stores) Add(store cache.Indexer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stores = append(s.stores, store)
}

func (s *Stores) all() []cache.Indexer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.stores)
}

// Members returns the cached members of a source.
func (s *Stores) Members(id catalog.SourceID) []*State {
	var out []*State
	for _, store := range s.all() {
		objs, err := store.ByIndex(Index, id.Namespace+"/"+id.Name)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			if m, ok := obj.(*State); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// Source implements catalog.SourceGroups: the source's state from its
// members (Group).
func (s *Stores) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	return Group(id, s.Members(id))
}

// Names implements catalog.SourceGroups: the names of the sources with
// members in a namespace, sorted.
func (s *Stores) Names(namespace string) []string {
	var names []string
	for _, store := range s.all() {
		for _, v := range store.ListIndexFuncValues(Index) {
			if name, found := strings.CutPrefix(v, namespace+"/"); found {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
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
func Group(id catalog.SourceID, members []*State) (*catalog.SourceState, bool) {
	var chosen *State
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
	return &catalog.SourceState{
		Meta:     objmeta.Meta{Name: id.Name, Namespace: id.Namespace, ResourceVersion: chosen.ResourceVersion},
		Digests:  chosen.Digests,
		Baseline: !updated,
	}, true
}

// writtenAfter reports whether a was written after b: by resourceVersion,
// which orders writes within a resource; unparsable versions, and ties,
// fall back to the names, so that the choice never depends on the order
// the cache lists them in.
func writtenAfter(a, b *State) bool {
	if c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion); err == nil && c != 0 {
		return c > 0
	}
	return a.Name > b.Name
}
