// Package templaterv follows the write that gave each workload its pod
// template, so that decisions can order a template change against a
// source's (WorkloadState.TemplateRV).
package templaterv

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
)

// Tracker follows, for the workloads of one informer, the write that
// gave each workload its current pod template, and hands its resourceVersion
// to decisions as WorkloadState.TemplateRV.
//
// The transform runs when an object is queued, before the cache holds the
// previous state, so the tracker keeps its own memory: per workload its UID,
// template hash, and what is known of the write that set that template.
//
// A watch event is a write and carries that write's resourceVersion: when it
// changes the template, or creates the workload, that resourceVersion is
// exactly the template's. The objects of a list (at start-up, after a relist)
// and a watch's initial events are states, not writes: a template first seen
// or changed there was set by some earlier write, so its resourceVersion stays
// unknown, which decisions treat as "order unknown" (the safe way). The
// informer's ListerWatcher tells the tracker which of the two it delivers
// (BeginList, BeginWatch, InitialEventsEnded); the reflector runs list, watch
// and transform on one goroutine, in that order.
type Tracker struct {
	// creations: a workload first seen in a live watch was created by that
	// write. False under a label selector, where a label change that makes an
	// older workload match arrives as an ADDED event too.
	creations bool

	mu   sync.Mutex
	live bool
	// gen counts lists and watches, so that the end of one watch's initial
	// events cannot make a later list look live.
	gen  uint64
	seen map[workloadName]trackedTemplate
}

type workloadName struct{ namespace, name string }

type trackedTemplate struct {
	uid  types.UID
	hash string
	rv   string // "" when unknown
}

// New returns the tracker of one workload informer.
// creations says whether a workload that appears in a live watch was created
// by that event (true unless workloads are filtered by a label selector).
func New(creations bool) *Tracker {
	return &Tracker{creations: creations, seen: map[workloadName]trackedTemplate{}}
}

// BeginList is called when the informer lists: what follows are states.
func (t *Tracker) BeginList() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.live = false
}

// BeginWatch is called when the informer starts a watch. live says whether
// its events are writes from the start; a watch with initial events (sent
// from resourceVersion "" or "0", or asked for with sendInitialEvents) starts
// with states. The returned generation is passed to InitialEventsEnded.
func (t *Tracker) BeginWatch(live bool) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.live = live
	return t.gen
}

// InitialEventsEnded is called once the informer has taken the bookmark that
// ends a watch's initial events: later events of that watch are writes.
func (t *Tracker) InitialEventsEnded(gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen == gen {
		t.live = true
	}
}

// Reduce returns the informer transform of a tracked kind: ReduceWorkload,
// and the template's resourceVersion when known.
func (t *Tracker) Reduce(kind config.WorkloadKind, cfg *config.Config) cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // reduced already, or a tombstone
		}
		state := catalog.ReduceWorkloadObject(u, kind, cfg)
		t.observe(state)
		return state, nil
	}
}

func (t *Tracker) observe(state *catalog.WorkloadState) {
	key := workloadName{state.Namespace, state.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, known := t.seen[key]
	known = known && prev.uid == state.UID
	var rv string
	switch {
	case known && prev.hash == state.TemplateHash:
		rv = prev.rv // the template did not change: what was known stays known
	case !t.live:
		// A state: the template was set by some earlier write.
	case known:
		rv = state.ResourceVersion // this write changed the template
	case t.creations:
		rv = state.ResourceVersion // this write created the workload
	}
	t.seen[key] = trackedTemplate{uid: state.UID, hash: state.TemplateHash, rv: rv}
	state.TemplateRV = rv
}

// Forget drops a deleted workload (a *WorkloadState or a tombstone holding
// one). A workload re-created under the same name meanwhile has another UID
// and is kept.
func (t *Tracker) Forget(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	state, ok := obj.(*catalog.WorkloadState)
	if !ok {
		return
	}
	key := workloadName{state.Namespace, state.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.seen[key]; ok && prev.uid == state.UID {
		delete(t.seen, key)
	}
}

// Len returns how many workloads the tracker remembers.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}
