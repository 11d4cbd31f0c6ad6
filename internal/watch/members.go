package watch

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/members"
)

// membersHandler is a Handler that is told of the events of members of
// sources of lifecycle updatesOnly that are not changes
// (restart.Controller).
type membersHandler interface {
	// SourceMembersChanged reports that a member of the source was created
	// or deleted, or rewritten without a change of its data: none of these
	// is a change of the source (no grace period, no restart for it), but
	// the source's value may be another (members.Group), so its readers
	// are decided again.
	SourceMembersChanged(id catalog.SourceID)
}

// startMemberInformers watches a source kind of lifecycle updatesOnly
// (config.Members): a dynamic informer per watched namespace, objects
// reduced to members.States, indexed by the source they are members
// of.
func (w *Watcher) startMemberInformers(ctx context.Context, kind config.SourceKind) error {
	stores := &members.Stores{}
	w.Catalog.AddSourceGroups(kind.Name, stores)
	for _, ns := range w.Config.WatchedNamespaces() {
		sel := selectors{label: w.Config.SourceSelector.String(), field: w.Config.IgnoredNamespacesField()}
		informer := dynamicInformer(w.Dynamic, kind.GVR, ns, sel, nil, members.Indexers())
		handler := memberHandler{kind: kind.Name, handler: w.Handler, metrics: w.Metrics}
		// The store joins the catalog before the informer runs, as for
		// other sources.
		stores.Add(informer.GetIndexer())
		if err := w.start(ctx, informer, members.Reduce(kind.Members), handler, Target{RoleSource, kind.GVR, ns}); err != nil {
			return fmt.Errorf("watching %s: %w", kind.GVR, err)
		}
	}
	return nil
}

// memberKind is a source kind of lifecycle updatesOnly as startKind starts
// it: until it is served, no workload reads any of its sources (they are
// unknown, never absent).
func (w *Watcher) memberKind(kind config.SourceKind) lateKind {
	return lateKind{role: RoleSource, gvr: kind.GVR, start: func(ctx context.Context, _ string) error {
		if err := w.startMemberInformers(ctx, kind); err != nil {
			return err
		}
		w.Log.Info("watching source kind", "resource", kind.GVR.String(), "lifecycle", config.LifecycleUpdatesOnly)
		return nil
	}}
}

// memberHandler turns the events of members into source IDs: the source
// each is a member of. Only an update that changes a member's data is a
// change (a grace period, then the readers decided); creations and
// deletions never are (the CSI driver creates and deletes its status
// objects with pods, so a restart for one would make more: a loop). They,
// and rewrites without a change of data (a remount: generation rises, so
// the member now counts as updated), only have the readers decided again
// at once, since the source's value may be another. It holds what a
// sourceHandler holds.
type memberHandler sourceHandler

func (h memberHandler) id(m *members.State) catalog.SourceID {
	return catalog.SourceID{Kind: h.kind, Namespace: m.Namespace, Name: m.Source}
}

func (h memberHandler) membersChanged(m *members.State) {
	if m.Source == "" {
		return
	}
	if mh, ok := h.handler.(membersHandler); ok {
		mh.SourceMembersChanged(h.id(m))
	}
}

func (h memberHandler) OnAdd(obj interface{}, isInInitialList bool) {
	h.metrics.ResourceVersions.Inc()
	if m, ok := obj.(*members.State); ok && !isInInitialList {
		h.membersChanged(m)
	}
}

func (h memberHandler) OnUpdate(oldObj, newObj interface{}) {
	h.metrics.ResourceVersions.Inc()
	old, ok1 := oldObj.(*members.State)
	m, ok2 := newObj.(*members.State)
	switch {
	case !ok1 || !ok2:
	case old.Source != m.Source:
		// Another source's member now (never done by the CSI driver).
		h.membersChanged(old)
		h.membersChanged(m)
	case m.Source != "" && !old.SameData(m):
		h.handler.SourceChanged(h.id(m), m.ChangedKeys(old))
	case old.Generation != m.Generation:
		h.membersChanged(m)
	}
}

func (h memberHandler) OnDelete(obj interface{}) {
	h.metrics.ResourceVersions.Inc()
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if m, ok := obj.(*members.State); ok {
		h.membersChanged(m)
	}
}
