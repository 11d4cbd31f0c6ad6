package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/access"
	"github.com/restart-controller/restart-controller/internal/catalog"
)

// Least privilege that degrades, never stalls: a configured kind this process
// may not list or watch (a typo in the ClusterRole, a CRD whose rule was
// forgotten, a namespace without its RoleBinding) is reported at once (a log
// line naming the kind and the missing verbs, restart_controller_kind_degraded,
// and a HealthChange for an Event) and is not waited for, so every other kind
// keeps working. Its informer keeps retrying; once it has listed and access
// is confirmed, the mark clears and the kind joins.

// Roles of a watched kind.
const (
	RoleSource   = "source"
	RoleWorkload = "workload"
)

// Reasons a kind is degraded; the values are those of the metric's reason label.
const (
	// ReasonForbidden: this process may not list or watch the kind. Its cache
	// cannot fill, so it is not waited for.
	ReasonForbidden = "forbidden"
	// ReasonNotFound: the API server no longer serves the resource (its CRD
	// was deleted). Not waited for either.
	ReasonNotFound = "not_found"
	// ReasonPatchForbidden: a workload kind is watched, but this process may
	// not patch it, so its workloads cannot be restarted.
	ReasonPatchForbidden = "patch_forbidden"
)

// Target is what one informer watches: a configured kind in one namespace.
type Target struct {
	Role      string // RoleSource or RoleWorkload
	Resource  schema.GroupVersionResource
	Namespace string // "" means all namespaces
}

func (t Target) namespaceText() string {
	if t.Namespace == "" {
		return "all namespaces"
	}
	return "namespace " + t.Namespace
}

func (t Target) String() string {
	return fmt.Sprintf("%s kind %s (%s)", t.Role, t.Resource, t.namespaceText())
}

// Degradation is why one target does not fully work.
type Degradation struct {
	Target
	Reason string
	// MissingVerbs are the verbs an access review denied, when known.
	MissingVerbs []string
	// Detail is the API server's error or the access review's answer.
	Detail string
	Since  time.Time
}

// Summary says what is wrong in one line, for logs, Events and /readyz.
func (d Degradation) Summary() string {
	verbs := "list, watch"
	if len(d.MissingVerbs) > 0 {
		verbs = strings.Join(d.MissingVerbs, ", ")
	}
	switch d.Reason {
	case ReasonForbidden:
		return fmt.Sprintf("%s: forbidden (missing verbs: %s): not watched; every other kind keeps working", d.Target, verbs)
	case ReasonNotFound:
		return fmt.Sprintf("%s: no longer served by the API server: not watched; every other kind keeps working", d.Target)
	case ReasonPatchForbidden:
		return fmt.Sprintf("%s: watched, but patch is forbidden: its workloads cannot be restarted", d.Target)
	}
	return fmt.Sprintf("%s: %s", d.Target, d.Reason)
}

// HealthChange reports a target that became degraded, or recovered.
type HealthChange struct {
	Degradation
	Recovered bool
}

// AccessChecker answers whether this process may use a verb on a resource in
// a namespace ("" means all namespaces): a SelfSubjectAccessReview, which
// needs no permission of its own.
type AccessChecker func(ctx context.Context, verb string, resource schema.GroupVersionResource, namespace string) (allowed bool, err error)

// health is the degraded state of every informer. Its zero value is ready to use.
type health struct {
	mu      sync.Mutex
	tracked []*tracked
	// reviewed holds answers of access reviews made for targets about to start.
	reviewed map[Target]map[string]bool
}

// tracked is one informer and its marks, which health.mu guards.
type tracked struct {
	target    Target
	informer  cache.SharedIndexInformer
	listWatch *mark // ReasonForbidden or ReasonNotFound
	patch     *mark // ReasonPatchForbidden
}

type mark struct {
	Degradation
	// rvAtError is the informer's resource version at the last error: a
	// different one later means it has listed or watched since.
	rvAtError string
	// nextReview is when access may be reviewed again for this mark.
	nextReview time.Time
}

func verbsFor(role string) []string {
	if role == RoleWorkload {
		return access.WorkloadVerbs()
	}
	return access.SourceVerbs()
}

// reviewAccess asks, for each target, whether this process may use each
// verb it needs, a few questions at a time, and keeps the answers for track.
// A question that fails is left unanswered: the informer's errors still tell.
func (w *Watcher) reviewAccess(ctx context.Context, targets []Target) {
	if w.Access == nil || len(targets) == 0 {
		return
	}
	var (
		mu      sync.Mutex
		answers = map[Target]map[string]bool{}
		reviews errgroup.Group
	)
	reviews.SetLimit(8)
	for _, t := range targets {
		for _, verb := range verbsFor(t.Role) {
			reviews.Go(func() error {
				allowed, err := w.Access(ctx, verb, t.Resource, t.Namespace)
				if err != nil {
					w.Log.Debug("cannot review access; relying on the informer's errors", "resource", t.Resource.String(),
						"namespace", t.namespaceText(), "verb", verb, "error", err)
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				if answers[t] == nil {
					answers[t] = map[string]bool{}
				}
				answers[t][verb] = allowed
				return nil
			})
		}
	}
	_ = reviews.Wait() // nil: a question that fails is left unanswered, not an error
	w.health.mu.Lock()
	defer w.health.mu.Unlock()
	if w.health.reviewed == nil {
		w.health.reviewed = map[Target]map[string]bool{}
	}
	for t, a := range answers {
		w.health.reviewed[t] = a
	}
}

// denied asks now which of the verbs this process may not use on the target.
// answered is false when there is no access checker or a question failed.
func (w *Watcher) denied(ctx context.Context, t Target, verbs ...string) (missing []string, answered bool) {
	if w.Access == nil {
		return nil, false
	}
	answered = true
	for _, verb := range verbs {
		allowed, err := w.Access(ctx, verb, t.Resource, t.Namespace)
		if err != nil {
			w.Log.Debug("cannot review access", "resource", t.Resource.String(), "namespace", t.namespaceText(), "verb", verb, "error", err)
			answered = false
			continue
		}
		if !allowed {
			missing = append(missing, verb)
		}
	}
	return missing, answered
}

// track registers an informer about to start, marks it degraded if the up-front
// access review denied it a verb, and returns what start hooks to it.
func (w *Watcher) track(t Target, informer cache.SharedIndexInformer) *tracked {
	tr := &tracked{target: t, informer: informer}
	w.health.mu.Lock()
	answers := w.health.reviewed[t]
	delete(w.health.reviewed, t)
	w.health.tracked = append(w.health.tracked, tr)
	w.health.mu.Unlock()

	deniedOf := func(verbs ...string) []string {
		var out []string
		for _, v := range verbs {
			if allowed, ok := answers[v]; ok && !allowed {
				out = append(out, v)
			}
		}
		return out
	}
	// A kind that may not be listed or watched is one degradation, whatever
	// else it lacks (its missing verbs say); patch alone is another.
	if len(deniedOf("list", "watch")) > 0 {
		missing := deniedOf(verbsFor(t.Role)...)
		w.degrade(tr, ReasonForbidden, missing, "access review: may not "+strings.Join(missing, ", "), "")
	} else if t.Role == RoleWorkload && len(deniedOf("patch")) > 0 {
		w.degrade(tr, ReasonPatchForbidden, []string{"patch"}, "access review: may not patch", "")
	}
	return tr
}

// settled is what WaitForSync and Ready wait for: the informer has synced, or
// it cannot, because this process may not list or watch its kind (or the kind
// is gone). Such a kind must not hold up the others; it joins when it syncs.
func (w *Watcher) settled(tr *tracked) cache.InformerSynced {
	return func() bool {
		if tr.informer.HasSynced() {
			return true
		}
		w.health.mu.Lock()
		defer w.health.mu.Unlock()
		return tr.listWatch != nil
	}
}

// classify names the degradation an informer error means, or "" for errors
// that are not about this kind's access (the API server down, a timeout),
// which client-go's default handler logs and its retries cover.
func classify(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	case apierrors.IsNotFound(err):
		return ReasonNotFound
	}
	return ""
}

// watchErrorHandler is the informer's handler of list and watch errors. The
// reflector keeps retrying with backoff whatever it does.
func (w *Watcher) watchErrorHandler(tr *tracked) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		reason := classify(err)
		if reason == "" {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			return
		}
		w.health.mu.Lock()
		known := tr.listWatch != nil && tr.listWatch.Reason == reason
		w.health.mu.Unlock()
		var missing []string
		if reason == ReasonForbidden && !known {
			missing, _ = w.denied(ctx, tr.target, verbsFor(tr.target.Role)...)
		}
		w.degrade(tr, reason, missing, err.Error(), tr.informer.LastSyncResourceVersion())
	}
}

func (w *Watcher) slot(tr *tracked, reason string) **mark {
	if reason == ReasonPatchForbidden {
		return &tr.patch
	}
	return &tr.listWatch
}

func metricLabels(d Degradation) []string {
	return []string{d.Resource.String(), d.Namespace, d.Reason}
}

// degrade marks the target; only a new mark (or a new reason) is reported.
func (w *Watcher) degrade(tr *tracked, reason string, missing []string, detail, rv string) {
	w.health.mu.Lock()
	slot := w.slot(tr, reason)
	if m := *slot; m != nil && m.Reason == reason {
		m.rvAtError = rv
		m.Detail = detail
		w.health.mu.Unlock()
		w.Log.Debug("kind still degraded", "role", tr.target.Role, "resource", tr.target.Resource.String(),
			"namespace", tr.target.namespaceText(), "reason", reason, "error", detail)
		return
	}
	if old := *slot; old != nil {
		w.Metrics.KindDegraded.DeleteLabelValues(metricLabels(old.Degradation)...)
	}
	m := &mark{
		Degradation: Degradation{Target: tr.target, Reason: reason, MissingVerbs: missing, Detail: detail, Since: time.Now()},
		rvAtError:   rv,
	}
	*slot = m
	w.Metrics.KindDegraded.WithLabelValues(metricLabels(m.Degradation)...).Set(1)
	w.refreshWatchedLocked(tr.target.Resource)
	w.health.mu.Unlock()

	w.Log.Error("kind degraded: "+m.Summary(), "role", tr.target.Role, "resource", tr.target.Resource.String(),
		"namespace", tr.target.namespaceText(), "reason", reason, "missing_verbs", strings.Join(missing, ","), "error", detail)
	if w.Health != nil {
		w.Health(HealthChange{Degradation: m.Degradation})
	}
}

// markRecovered clears the mark if it is still the one checked.
func (w *Watcher) markRecovered(tr *tracked, m *mark) {
	w.health.mu.Lock()
	slot := w.slot(tr, m.Reason)
	if *slot != m {
		w.health.mu.Unlock()
		return
	}
	*slot = nil
	w.Metrics.KindDegraded.DeleteLabelValues(metricLabels(m.Degradation)...)
	w.refreshWatchedLocked(tr.target.Resource)
	w.health.mu.Unlock()

	w.Log.Info("kind recovered", "role", tr.target.Role, "resource", tr.target.Resource.String(),
		"namespace", tr.target.namespaceText(), "was", m.Reason, "degraded_for", time.Since(m.Since).Round(time.Second))
	if w.Health != nil {
		w.Health(HealthChange{Degradation: m.Degradation, Recovered: true})
	}
	if m.Reason != ReasonPatchForbidden && tr.target.Role == RoleSource {
		// Changes of this kind's data while it was not watched raised no
		// event: compare every workload again, as at start-up.
		w.requeueWorkloads()
	}
}

// refreshWatchedLocked sets restart_controller_workload_kind_watched of a
// started workload kind: 0 while any of its informers may not list or watch,
// and reports whether it is 1.
func (w *Watcher) refreshWatchedLocked(resource schema.GroupVersionResource) bool {
	watched, found := true, false
	for _, tr := range w.health.tracked {
		if tr.target.Role != RoleWorkload || tr.target.Resource != resource {
			continue
		}
		found = true
		if tr.listWatch != nil {
			watched = false
		}
	}
	if found {
		value := 0.0
		if watched {
			value = 1
		}
		w.Metrics.WatchedWorkloads.WithLabelValues(resource.String()).Set(value)
	}
	return watched
}

func (w *Watcher) refreshWatched(resource schema.GroupVersionResource) bool {
	w.health.mu.Lock()
	defer w.health.mu.Unlock()
	return w.refreshWatchedLocked(resource)
}

// requeueWorkloads hands every cached workload to the handler.
func (w *Watcher) requeueWorkloads() {
	w.health.mu.Lock()
	var workloads []*tracked
	for _, tr := range w.health.tracked {
		if tr.target.Role == RoleWorkload {
			workloads = append(workloads, tr)
		}
	}
	w.health.mu.Unlock()
	for _, tr := range workloads {
		for _, obj := range tr.informer.GetStore().List() {
			if state, ok := obj.(*catalog.WorkloadState); ok {
				w.Handler.WorkloadChanged(catalog.WorkloadKey{Resource: tr.target.Resource, Namespace: state.Namespace, Name: state.Name})
			}
		}
	}
}

// superviseHealth clears marks whose cause has gone, until ctx ends.
func (w *Watcher) superviseHealth(ctx context.Context) {
	interval := time.Second
	if w.DiscoveryInterval > 0 && w.DiscoveryInterval < interval {
		interval = w.DiscoveryInterval
	}
	wait.UntilWithContext(ctx, w.checkRecoveries, interval)
}

// checkRecoveries clears marks whose cause has gone:
//   - forbidden, once the informer has synced and an access review allows
//     list and watch (without an answer: once it has listed or watched since
//     its last error). A kind that may list but not watch syncs and lists
//     again after every failed watch, so syncing alone proves nothing;
//   - not_found, once the informer has synced and listed or watched since;
//   - patch_forbidden, once an access review allows patch.
//
// Access is reviewed at most once per discovery interval per mark.
func (w *Watcher) checkRecoveries(ctx context.Context) {
	type candidate struct {
		tr *tracked
		m  *mark
		rv string
	}
	now := time.Now()
	var candidates []candidate
	w.health.mu.Lock()
	for _, tr := range w.health.tracked {
		for _, m := range []*mark{tr.listWatch, tr.patch} {
			if m != nil {
				candidates = append(candidates, candidate{tr: tr, m: m, rv: m.rvAtError})
			}
		}
	}
	w.health.mu.Unlock()

	for _, c := range candidates {
		progressed := c.tr.informer.HasSynced() && c.tr.informer.LastSyncResourceVersion() != c.rv
		switch c.m.Reason {
		case ReasonNotFound:
			if !progressed {
				continue
			}
		case ReasonForbidden, ReasonPatchForbidden:
			verbs := []string{"patch"}
			if c.m.Reason == ReasonForbidden {
				if !c.tr.informer.HasSynced() {
					continue
				}
				verbs = verbsFor(c.tr.target.Role)
			}
			w.health.mu.Lock()
			due := !now.Before(c.m.nextReview)
			if due {
				c.m.nextReview = now.Add(w.DiscoveryInterval)
			}
			w.health.mu.Unlock()
			if !due {
				continue
			}
			missing, answered := w.denied(ctx, c.tr.target, verbs...)
			listWatchDenied := slices.Contains(missing, "list") || slices.Contains(missing, "watch")
			patchDenied := slices.Contains(missing, "patch")
			if c.m.Reason == ReasonPatchForbidden && (patchDenied || !answered) {
				continue
			}
			if c.m.Reason == ReasonForbidden && (listWatchDenied || (!answered && !progressed)) {
				continue
			}
			w.markRecovered(c.tr, c.m)
			if c.m.Reason == ReasonForbidden && patchDenied {
				// Watched now, but still unable to restart.
				w.degrade(c.tr, ReasonPatchForbidden, []string{"patch"}, "access review: may not patch", "")
			}
			continue
		}
		w.markRecovered(c.tr, c.m)
	}
}

// Degraded lists every degraded target, sorted.
func (w *Watcher) Degraded() []Degradation {
	w.health.mu.Lock()
	var out []Degradation
	for _, tr := range w.health.tracked {
		for _, m := range []*mark{tr.listWatch, tr.patch} {
			if m != nil {
				out = append(out, m.Degradation)
			}
		}
	}
	w.health.mu.Unlock()
	slices.SortFunc(out, func(a, b Degradation) int {
		return strings.Compare(a.Role+a.Resource.String()+"/"+a.Namespace+"/"+a.Reason, b.Role+b.Resource.String()+"/"+b.Namespace+"/"+b.Reason)
	})
	return out
}

// Readiness is what /readyz answers: Ready's error, or a note naming every
// degraded kind ("" when none). A degraded replica is ready: it keeps every
// other kind working and may lead; the note, the metric, the log and an
// Event tell the operator.
func (w *Watcher) Readiness() (string, error) {
	var note string
	if degraded := w.Degraded(); len(degraded) > 0 {
		lines := []string{fmt.Sprintf("degraded: %d", len(degraded))}
		for _, d := range degraded {
			lines = append(lines, "  "+d.Summary())
		}
		note = strings.Join(lines, "\n")
	}
	if err := w.Ready(); err != nil {
		if note != "" {
			return "", fmt.Errorf("%w\n%s", err, note)
		}
		return "", err
	}
	return note, nil
}
