// Package watch runs an informer for every configured source and workload
// kind (protobuf for core/v1 source kinds, the dynamic client for the
// rest), reduces objects as they enter the caches, watches for workload kinds
// whose CRD appears later, and turns events into keys for the restart
// controller. It never decides anything itself.
package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/templaterv"
)

// Handler receives keys computed from events.
type Handler interface {
	// SourceChanged reports a data change of an existing source, and the
	// keys it touched (nil when unknown, e.g. for a large source).
	SourceChanged(id catalog.SourceID, changedKeys []string)
	// SourceCreated reports a source created after start-up.
	SourceCreated(id catalog.SourceID)
	// SourceDeleted reports a source deleted.
	SourceDeleted(id catalog.SourceID)
	// WorkloadChanged reports a workload that appeared or changed in a way decisions see.
	WorkloadChanged(key catalog.WorkloadKey)
	// SourceAnnotated reports a change of the annotations kept of a source
	// (ignore, release) without a change of its data.
	SourceAnnotated(id catalog.SourceID)
}

// Watcher owns the informers.
type Watcher struct {
	Deps
	// workloads lists and watches workload kinds: with Rest, a dynamic
	// client that decodes no managedFields (managedfields.go).
	workloads dynamic.Interface

	mu     sync.Mutex
	synced []cache.InformerSynced
	// missing are the kinds Run looks for: workload kinds, and source
	// kinds of lifecycle updatesOnly, not served yet.
	missing []lateKind
	// started is set once WaitForSync succeeded: before the informers exist,
	// an empty list of sync checks would otherwise read as "all synced".
	started atomic.Bool
	// health is the degraded state of every informer (health.go).
	health health
}

// Discovery says which resources the API server serves in a group-version:
// client-go's discovery client.
type Discovery interface {
	// ServerResourcesForGroupVersion returns a NotFound error for a
	// group-version that is not served.
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Deps are what a watcher uses.
type Deps struct {
	Config *config.Config
	// Rest configures the protobuf clients of source kinds and the lean
	// client of workload kinds; nil keeps every kind on Dynamic.
	Rest    *rest.Config
	Dynamic dynamic.Interface
	// Meta lists and watches Namespaces for a namespaceSelector.
	Meta      metadata.Interface
	Discovery Discovery
	Catalog   *catalog.Catalog
	Handler   Handler
	Metrics   *metrics.Metrics
	Log       hclog.Logger
	// Access reviews up front whether this process may list and watch
	// each kind; Health hears of kinds degraded and recovered.
	Access AccessChecker
	Health func(HealthChange)
	// DiscoveryInterval is how often kinds not served yet are looked for.
	DiscoveryInterval time.Duration
}

// New returns a watcher; Start begins watching.
func New(d Deps) *Watcher {
	w := &Watcher{Deps: d, workloads: d.Dynamic}
	if d.Rest != nil {
		// It cannot fail where client was made from rc; if it does, the
		// workloads are decoded whole, which costs only memory and time.
		lean, err := leanDynamicClient(d.Rest)
		if err != nil {
			d.Log.Warn("workloads are decoded with their managedFields", "error", err)
		} else {
			w.workloads = lean
		}
	}
	return w
}

// Kinds are the configured kinds as discovery served them at start.
type Kinds struct {
	sources   []Lookup
	workloads []Lookup
	// workloadErrs are the errors of looking workload kinds up: such a kind
	// is looked for again, as one not served yet.
	workloadErrs []error
}

// Resolve looks every configured kind up. A resource that a served
// built-in group-version does not serve (a typo such as "deploymnets" in
// apps) is a *ConfigError naming its place, reported with every other
// before anything is watched or written.
func Resolve(cfg *config.Config, disc Discovery) (*Kinds, error) {
	var problems []string
	k := &Kinds{sources: make([]Lookup, len(cfg.Sources)), workloads: make([]Lookup, len(cfg.Workloads)),
		workloadErrs: make([]error, len(cfg.Workloads))}
	for i, kind := range cfg.Sources {
		found, err := LookUp(disc, kind.GVR)
		if err != nil {
			return nil, fmt.Errorf("sources[%d]: looking up %s: %w", i, kind.GVR, err)
		}
		if problem := found.Misspelled(kind.GVR); problem != "" {
			problems = append(problems, fmt.Sprintf("sources[%d]: %s", i, problem))
			continue
		}
		if found.Resource == nil && NeededAtStart(kind) {
			return nil, fmt.Errorf("sources[%d]: %s is not served by the API server", i, kind.GVR)
		}
		k.sources[i] = found
	}
	for i, kind := range cfg.Workloads {
		k.workloads[i], k.workloadErrs[i] = LookUp(disc, kind.GVR)
		if k.workloadErrs[i] == nil {
			if problem := k.workloads[i].Misspelled(kind.GVR); problem != "" {
				problems = append(problems, fmt.Sprintf("workloads[%d]: %s", i, problem))
			}
		}
	}
	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	return k, nil
}

// Start starts the informers of every source kind and of every workload kind
// the API server served when Resolve looked (kinds); kinds not served yet
// are looked for by Run. Access is reviewed first, so that a kind this
// process may not list or watch is reported as degraded at once instead of
// holding up the rest.
func (w *Watcher) Start(ctx context.Context, kinds *Kinds) error {
	var targets []Target
	for i, kind := range w.Config.Sources {
		if kinds.sources[i].Resource != nil {
			targets = append(targets, w.targets(RoleSource, kind.GVR)...)
		}
	}
	for i, kind := range w.Config.Workloads {
		if kinds.workloadErrs[i] == nil && kinds.workloads[i].Resource != nil {
			targets = append(targets, w.targets(RoleWorkload, kind.GVR)...)
		}
	}
	w.reviewAccess(ctx, targets)
	go w.superviseHealth(ctx)

	// Before any workload informer: the catalog must know which
	// namespaces are selected before it hands out a workload.
	if err := w.startNamespaces(ctx); err != nil {
		return err
	}

	for i, kind := range w.Config.Sources {
		var err error
		if kind.Members != nil {
			err = w.startKind(ctx, w.memberKind(kind), true, kinds.sources[i], nil)
		} else {
			err = w.startSourceInformers(ctx, kind, kinds.sources[i].Resource.Kind)
		}
		if err != nil {
			return fmt.Errorf("sources[%d]: %w", i, err)
		}
	}
	for i, kind := range w.Config.Workloads {
		if err := w.startKind(ctx, w.workloadKind(kind), true, kinds.workloads[i], kinds.workloadErrs[i]); err != nil {
			return fmt.Errorf("workloads[%d]: %w", i, err)
		}
	}
	return nil
}

// targets are the informers of a kind: one per watched namespace.
func (w *Watcher) targets(role string, gvr schema.GroupVersionResource) []Target {
	var out []Target
	for _, ns := range w.Config.WatchedNamespaces() {
		out = append(out, Target{Role: role, Resource: gvr, Namespace: ns})
	}
	return out
}

// WaitForSync blocks until every started informer has synced or ctx ends.
// An informer of a kind this process may not list or watch (or that is no
// longer served) counts as done: it must not keep every other kind from
// working. It joins when it syncs (see settled in health.go).
func (w *Watcher) WaitForSync(ctx context.Context) error {
	w.mu.Lock()
	synced := append([]cache.InformerSynced(nil), w.synced...)
	w.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("waiting for caches to sync: %w", context.Cause(ctx))
	}
	w.started.Store(true)
	return nil
}

// Ready reports nil once the initial sync is done and every informer started
// since (a kind whose CRD appeared later) has synced too; degraded kinds
// excepted, which Readiness names.
func (w *Watcher) Ready() error {
	if !w.started.Load() {
		return errors.New("caches not synced yet")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.synced {
		if !s() {
			return errors.New("caches not synced yet")
		}
	}
	return nil
}

// Run looks for the kinds that were not served at start (a CRD not yet
// installed) until ctx ends, and starts watching each one when it appears.
func (w *Watcher) Run(ctx context.Context) {
	wait.NonSlidingUntilWithContext(ctx, w.startMissing, w.DiscoveryInterval)
}

// startMissing looks each missing kind up once, and starts the ones served.
func (w *Watcher) startMissing(ctx context.Context) {
	w.mu.Lock()
	missing := w.missing
	w.missing = nil
	w.mu.Unlock()
	for _, kind := range missing {
		found, err := LookUp(w.Discovery, kind.gvr)
		if err = w.startKind(ctx, kind, false, found, err); err != nil {
			w.Log.Error("looking up "+kind.role+" kind", "resource", kind.gvr.String(), "error", err)
			w.mu.Lock()
			w.missing = append(w.missing, kind)
			w.mu.Unlock()
		}
	}
}

// lateKind is a kind that may be served only after start-up: a workload
// kind, or a source kind of lifecycle updatesOnly (the CSI driver's), whose
// CRD may be installed later.
type lateKind struct {
	role string
	gvr  schema.GroupVersionResource
	// start starts its informers; objectKind is its Kind, as discovery
	// names it.
	start func(ctx context.Context, objectKind string) error
}

// startKind starts watching a kind that discovery served when looked up
// (found, or err), and otherwise puts it on the list Run looks for; only
// the first miss warns.
func (w *Watcher) startKind(ctx context.Context, kind lateKind, first bool, found Lookup, err error) error {
	label := kind.gvr.String()
	if err != nil && !first {
		return fmt.Errorf("looking up %s kind %s: %w", kind.role, kind.gvr, err)
	}
	if err != nil || found.Resource == nil {
		if err != nil {
			// One kind that cannot be looked up now (discovery briefly down, a
			// group's RBAC not granted yet) must not keep every other kind from
			// being watched: it joins the kinds Run keeps looking for.
			w.Log.Warn("cannot look up "+kind.role+" kind; will keep trying", "resource", label, "error", err)
		} else if first {
			w.Log.Warn(kind.role+" kind is not served (CRD not installed?); will watch it once it appears",
				"resource", label, "check_every", w.DiscoveryInterval)
		}
		if kind.role == RoleWorkload {
			w.Metrics.WatchedWorkloads.WithLabelValues(label).Set(0)
		}
		w.mu.Lock()
		w.missing = append(w.missing, kind)
		w.mu.Unlock()
		return nil
	}
	if !first {
		// Start reviewed the access of the kinds served then; a late one is
		// reviewed as it appears.
		w.reviewAccess(ctx, w.targets(kind.role, kind.gvr))
	}
	return kind.start(ctx, found.Resource.Kind)
}

// workloadKind is a workload kind as startKind starts it.
func (w *Watcher) workloadKind(kind config.WorkloadKind) lateKind {
	return lateKind{role: RoleWorkload, gvr: kind.GVR, start: func(ctx context.Context, objectKind string) error {
		if err := w.startWorkloadInformers(ctx, kind, objectKind); err != nil {
			return err
		}
		// 1, or 0 while an informer of the kind may not list or watch it.
		if w.refreshWatched(kind.GVR) {
			w.Log.Info("watching workload kind", "resource", kind.GVR.String())
		} else {
			w.Log.Warn("workload kind started but degraded; it joins once it may be listed and watched", "resource", kind.GVR.String())
		}
		return nil
	}}
}

// sourceReducer is how the catalog reduces sources with these data fields,
// keeping the source annotations decisions read (ignore, release, and
// those opt-ins require).
func (w *Watcher) sourceReducer(dataFields []string) catalog.SourceReducer {
	r := w.Catalog.SourceReducer(dataFields)
	r.Keep = w.Config.SourceAnnotations()
	return r
}

func (w *Watcher) startSourceInformers(ctx context.Context, kind config.SourceKind, objectKind string) error {
	for _, ns := range w.Config.WatchedNamespaces() {
		sel := selectors{label: w.Config.SourceSelector.String(), field: w.Config.IgnoredNamespacesField()}
		informer, err := sourceInformer(w.Rest, w.Dynamic, kind.GVR, objectKind, ns, sel, w.sourceReducer(kind.DataFields))
		if err != nil {
			return err
		}
		handler := sourceHandler{kind: kind.Name, handler: w.Handler, metrics: w.Metrics}
		// The store joins the catalog before the informer runs, so no key it
		// yields can be looked up before its store is known.
		w.Catalog.AddSourceStore(kind.Name, informer.GetIndexer())
		if err := w.start(ctx, informer, w.sourceReducer(kind.DataFields).Transform(), handler, Target{RoleSource, kind.GVR, ns}); err != nil {
			return fmt.Errorf("watching %s: %w", kind.GVR, err)
		}
	}
	return nil
}

func (w *Watcher) startWorkloadInformers(ctx context.Context, kind config.WorkloadKind, objectKind string) error {
	for _, ns := range w.Config.WatchedNamespaces() {
		var tracker *templaterv.Tracker
		transform := catalog.ReduceWorkload(kind, w.Config)
		if w.Config.OrderByResourceVersion {
			// Under a label selector, a workload appearing in the watch may
			// be an older one whose labels now match: not a creation.
			tracker = templaterv.New(w.Config.WorkloadSelector.Empty())
			transform = tracker.Reduce(kind, w.Config)
		}
		sel := selectors{label: w.Config.WorkloadSelector.String(), field: w.Config.IgnoredNamespacesField()}
		informer, typed, err := w.workloadInformer(kind.GVR, objectKind, ns, sel, tracker)
		if err != nil {
			return err
		}
		transform = typed(transform)
		if w.Config.NamespaceSelector != nil || w.Config.WindowsSelectNamespaces() {
			if err := informer.AddIndexers(catalog.NamespaceIndexers()); err != nil {
				return fmt.Errorf("indexing %s by namespace: %w", kind.GVR, err)
			}
		}
		handler := workloadHandler{resource: kind.GVR, handler: w.Handler, catalog: w.Catalog, tracker: tracker}
		w.Catalog.AddWorkloadStore(kind.GVR, informer.GetIndexer())
		if err := w.start(ctx, informer, transform, handler, Target{RoleWorkload, kind.GVR, ns}); err != nil {
			return fmt.Errorf("watching %s: %w", kind.GVR, err)
		}
	}
	return nil
}

// start installs the error handler that reports the target degraded when it
// may not be listed or watched, then runs the informer (run).
func (w *Watcher) start(ctx context.Context, informer cache.SharedIndexInformer, transform cache.TransformFunc, h cache.ResourceEventHandler,
	target Target) error {
	tracked := w.track(target, informer)
	if err := informer.SetWatchErrorHandlerWithContext(w.watchErrorHandler(tracked)); err != nil {
		return fmt.Errorf("setting watch error handler: %w", err)
	}
	return w.run(ctx, informer, transform, h, w.settled(tracked))
}

// run installs the transform, so only reduced objects ever reach the cache,
// and the handler, adds synced to what WaitForSync and Ready wait for, and
// runs the informer until ctx ends.
func (w *Watcher) run(ctx context.Context, informer cache.SharedIndexInformer, transform cache.TransformFunc, h cache.ResourceEventHandler,
	synced cache.InformerSynced) error {
	if err := informer.SetTransform(transform); err != nil {
		return fmt.Errorf("setting transform: %w", err)
	}
	if _, err := informer.AddEventHandler(h); err != nil {
		return fmt.Errorf("adding event handler: %w", err)
	}
	w.mu.Lock()
	w.synced = append(w.synced, synced)
	w.mu.Unlock()
	go informer.RunWithContext(ctx)
	return nil
}

// sourceHandler turns source events into source IDs. Objects in the initial
// list are not changes: start-up compares every workload anyway.
type sourceHandler struct {
	kind    string
	handler Handler
	metrics *metrics.Metrics
}

func (h sourceHandler) OnAdd(obj interface{}, isInInitialList bool) {
	h.metrics.ResourceVersions.Inc()
	if state, ok := obj.(*catalog.SourceState); ok && !isInInitialList {
		h.handler.SourceCreated(catalog.SourceID{Kind: h.kind, Namespace: state.Namespace, Name: state.Name})
	}
}

func (h sourceHandler) OnUpdate(oldObj, newObj interface{}) {
	h.metrics.ResourceVersions.Inc()
	oldState, ok1 := oldObj.(*catalog.SourceState)
	newState, ok2 := newObj.(*catalog.SourceState)
	if !ok1 || !ok2 {
		return
	}
	id := catalog.SourceID{Kind: h.kind, Namespace: newState.Namespace, Name: newState.Name}
	switch {
	case !oldState.SameData(newState):
		h.handler.SourceChanged(id, newState.ChangedKeys(oldState))
	case !maps.Equal(oldState.Annotations, newState.Annotations):
		h.handler.SourceAnnotated(id)
	}
}

// OnDelete reports the deletion: decisions compare what its readers'
// pods started with against its absence (config sourceLifecycle).
func (h sourceHandler) OnDelete(obj interface{}) {
	h.metrics.ResourceVersions.Inc()
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if state, ok := obj.(*catalog.SourceState); ok {
		h.handler.SourceDeleted(catalog.SourceID{Kind: h.kind, Namespace: state.Namespace, Name: state.Name})
	}
}

// workloadHandler turns workload events into keys, skipping updates that only
// touch what decisions do not read (status, replicas).
type workloadHandler struct {
	resource schema.GroupVersionResource
	handler  Handler
	// catalog indexes the sources each workload reads, before the
	// workload is enqueued.
	catalog *catalog.Catalog
	// tracker forgets deleted workloads; nil when ordering is off.
	tracker *templaterv.Tracker
}

func (h workloadHandler) key(state *catalog.WorkloadState) catalog.WorkloadKey {
	return catalog.WorkloadKey{Resource: h.resource, Namespace: state.Namespace, Name: state.Name}
}

// listedHandler is a Handler that takes the workloads of an informer's
// first list apart from changes (restart.Controller: it queues them as the
// queue has room, so that the queue does not grow to the cluster's size).
type listedHandler interface {
	WorkloadListed(key catalog.WorkloadKey)
}

func (h workloadHandler) OnAdd(obj interface{}, initialList bool) {
	if state, ok := obj.(*catalog.WorkloadState); ok {
		h.catalog.WorkloadCached(h.resource, nil, state)
		if l, ok := h.handler.(listedHandler); ok && initialList {
			l.WorkloadListed(h.key(state))
			return
		}
		h.handler.WorkloadChanged(h.key(state))
	}
}

func (h workloadHandler) OnUpdate(oldObj, newObj interface{}) {
	oldState, ok1 := oldObj.(*catalog.WorkloadState)
	newState, ok2 := newObj.(*catalog.WorkloadState)
	if ok1 && ok2 && !oldState.SameDecisionInputs(newState) {
		h.catalog.WorkloadCached(h.resource, oldState, newState)
		h.handler.WorkloadChanged(h.key(newState))
	}
}

// OnDelete enqueues the key too: the controller then forgets what it kept
// of the workload (a hold it counted, a wave place it waited for).
func (h workloadHandler) OnDelete(obj interface{}) {
	if h.tracker != nil {
		h.tracker.Forget(obj)
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if state, ok := obj.(*catalog.WorkloadState); ok {
		h.catalog.WorkloadCached(h.resource, state, nil)
		h.handler.WorkloadChanged(h.key(state))
	}
}
