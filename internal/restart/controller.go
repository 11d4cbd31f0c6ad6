package restart

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/fleet"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// Catalog is what the controller reads: cached workloads and sources.
type Catalog = fleet.Catalog

// EventRecorder reports persistent failures on the workload they concern, where
// `kubectl describe` shows them to the workload's owners.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// ExistsFunc asks the API server whether a source exists.
type ExistsFunc func(ctx context.Context, id catalog.SourceID) (bool, error)

// errCacheBehind makes the queue retry a workload soon: a source the cache
// does not hold yet exists, and deciding now would record it as absent.
var errCacheBehind = errors.New("a referenced source exists but is not in the cache yet")

// Controller reconciles one workload key at a time: the queue holds keys and
// the decision reads caches. A reconcile calls the API only to patch what
// changed, to confirm with a metadata-only LIST that a source about to be
// recorded as absent really is, and to report Events. Retries live in the
// queue.
type Controller struct {
	cfg     *config.Config
	catalog Catalog
	client  dynamic.Interface
	windows *Windows
	metrics *metrics.Metrics
	events  EventRecorder
	exists  ExistsFunc
	keys    KeyReader // keyed reads of large sources (keys.go)
	sums    checksum.Hasher
	log     hclog.Logger
	now     func() time.Time

	templateFields map[schema.GroupVersionResource][]string
	// rolloutRules read each kind's rollout status after a restart.
	rolloutRules map[schema.GroupVersionResource]rollout.Rule
	fleet        *fleet.Fleet
	queue        workqueue.TypedRateLimitingInterface[catalog.WorkloadKey]
	dryRun       simulatedPatches
	// meta, when set, sends the decisions' patches (PatchWith).
	meta metadata.Interface
	// backlog holds the start-up list until the queue has room (startup.go).
	backlog backlog
	// fresh, when set, says whether this replica may still write: its
	// leader lease is certainly its own (WriteOnlyWhile).
	fresh func() bool
	// warned are the Warning Events about workloads' own state recorded
	// (warnings.go).
	warned warnings
	// notifier, when set, is told of restarts, holds and rollout outcomes (notify.go).
	notifier Notifier
	// followed are the unwritten rollouts this process follows (rollouts.go).
	followed followed
}

// New builds a controller. The queue exists from the start so that events
// arriving while caches sync are kept until workers run.
func New(cfg *config.Config, cat Catalog, client dynamic.Interface, exists ExistsFunc, m *metrics.Metrics, events EventRecorder, log hclog.Logger) (*Controller, error) {
	fields := map[schema.GroupVersionResource][]string{}
	rules := map[schema.GroupVersionResource]rollout.Rule{}
	for i, w := range cfg.Workloads {
		rules[w.GVR] = w.Rollout
		f, ok := w.PodTemplatePath.Fields()
		if !ok {
			return nil, fmt.Errorf("workloads[%d].podTemplatePath: %s fans out; a patch needs one place", i, w.PodTemplatePath)
		}
		fields[w.GVR] = f
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter[catalog.WorkloadKey](
		workqueue.NewTypedItemExponentialFailureRateLimiter[catalog.WorkloadKey](20*time.Millisecond, time.Minute),
		// The global bucket bounds retries of many failing items together,
		// so an API outage is not met with a retry storm.
		&workqueue.TypedBucketRateLimiter[catalog.WorkloadKey]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
	c := &Controller{
		cfg:            cfg,
		catalog:        cat,
		client:         client,
		windows:        NewWindows(cfg.Settings.GracePeriod),
		metrics:        m,
		events:         events,
		exists:         exists,
		log:            log,
		now:            time.Now,
		templateFields: fields,
		rolloutRules:   rules,
		backlog:        newBacklog(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[catalog.WorkloadKey]{
			Name:            "workloads",
			MetricsProvider: m.QueueMetrics(),
		}),
	}
	c.fleet = fleet.New(time.Now(), cat, c.rules)
	return c, nil
}

// UseChecksums sets how checksums are computed: the key is loaded only once
// the configuration has been checked against the cluster (so a wrong one
// creates nothing), after New and before Run.
func (c *Controller) UseChecksums(sums checksum.Hasher) { c.sums = sums }

// SourceChanged is called by the watcher when a source's data changed.
// changedKeys are the keys whose data changed; nil when unknown.
func (c *Controller) SourceChanged(id catalog.SourceID, changedKeys []string) {
	c.sourceEvent(id, false, changedKeys)
}

// SourceCreated is called by the watcher when a source is created after start-up.
func (c *Controller) SourceCreated(id catalog.SourceID) { c.sourceEvent(id, true, nil) }

// SourceDeleted is called by the watcher when a source is deleted. Its
// readers are decided when the grace period it opens ends, as for a
// change: a deletion and a re-creation inside it are one decision. Like a
// creation, it touches no key that pods read before.
func (c *Controller) SourceDeleted(id catalog.SourceID) { c.sourceEvent(id, true, nil) }

// sourceEvent opens or joins the source's grace period and schedules every
// workload that reads it for when that ends.
func (c *Controller) sourceEvent(id catalog.SourceID, created bool, changedKeys []string) {
	now := c.now()
	due, merged := c.windows.Observe(id, now, created, changedKeys)
	c.fleet.SourceChanged(id, now, c.cfg.Breaker.Quiet)
	c.metrics.ChangesProcessed.Inc()
	if merged {
		c.metrics.ChangesMerged.Inc()
	}
	for _, key := range c.catalog.WorkloadsReading(id) {
		c.queue.AddAfter(key, due.Sub(now))
	}
}

// WorkloadChanged is called by the watcher when a workload appeared or changed
// in a way that matters to decisions.
// It comes after the informer stored the change: wave memos read the
// workload again from the cache.
func (c *Controller) WorkloadChanged(key catalog.WorkloadKey) {
	c.fleet.WorkloadCached(key)
	c.queue.Add(key)
}

// SourceAnnotated is called by the watcher when a source's release or ignore
// annotation changed: its readers are decided again at once.
func (c *Controller) SourceAnnotated(id catalog.SourceID) {
	for _, key := range c.catalog.WorkloadsReading(id) {
		c.queue.Add(key)
	}
}

// SourceMembersChanged is called by the watcher when a member of a source
// of lifecycle updatesOnly was created, deleted, or rewritten without a
// change of its data: not a change (no grace period opens), but the
// source's value may be another, so its readers are decided again at
// once; a baseline only fills records they do not have yet.
func (c *Controller) SourceMembersChanged(id catalog.SourceID) {
	for _, key := range c.catalog.WorkloadsReading(id) {
		c.queue.Add(key)
	}
}

// Run processes the queue with the given number of workers until ctx ends.
// Then it stops taking items at once, even those already queued (the next
// leader, or this process at its next start, compares every workload anyway),
// and waits for the reconciles under way, giving them at most drainTimeout.
// Patches use writeCtx: cancelling it (the leader lease was lost) stops every
// write at once, while cancelling ctx alone (SIGTERM) lets writes under way
// finish, so a restart and its checksums land together.
func (c *Controller) Run(ctx, writeCtx context.Context, workers int, drainTimeout time.Duration) {
	writeCtx, cancelWrites := context.WithCancel(writeCtx)
	defer cancelWrites()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.feed(ctx, backlogPerWorker*workers)
	}()
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx, writeCtx) {
			}
		}()
	}

	select {
	case <-ctx.Done():
	case <-writeCtx.Done():
	}
	c.log.Info("stopping: finishing reconciles under way; queued work is left to the next start")
	// ShutDown wakes workers blocked in Get; items still queued are not
	// processed because every worker checks the contexts after Get.
	c.queue.ShutDown()
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		c.log.Warn("drain timed out; cancelling writes under way", "timeout", drainTimeout)
		cancelWrites()
		<-drained
	}
}

// Sweep publishes how many changes wait and forgets ended grace periods and
// the followed rollouts past their deadline until ctx ends. Every replica runs it, leader or not: a standby observes changes
// too, and its windows would otherwise grow for as long as it stands by.
func (c *Controller) Sweep(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) {
		now := c.now()
		c.metrics.SetChangesWaiting(c.windows.Sweep(now))
		c.followed.sweep(now)
	}, c.cfg.Settings.CheckPeriod)
}

// processNext reconciles one key, writing with writeCtx. It returns false
// once the queue is shut down or either context has ended, leaving an item
// taken after that unprocessed.
func (c *Controller) processNext(runCtx, writeCtx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if runCtx.Err() != nil || writeCtx.Err() != nil {
		return false
	}
	ctx := writeCtx

	c.metrics.Reconciling.Inc()
	err := c.Reconcile(ctx, key)
	c.metrics.Reconciling.Dec()
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, errLeaseStale):
		c.log.Warn("not writing: the leader lease may have passed to another replica", "workload", key.String())
		c.queue.AddRateLimited(key)
	case errors.Is(err, errCacheBehind):
		c.log.Debug("source cache behind; deciding again shortly", "workload", key.String())
		c.queue.AddRateLimited(key)
	case apierrors.IsConflict(err):
		// The cache is behind the API server; decide again once it catches up.
		c.metrics.ReconcileErrors.WithLabelValues("conflict").Inc()
		c.log.Debug("conflict; retrying on fresh state", "workload", key.String())
		c.queue.AddRateLimited(key)
	case c.ignored(err):
		// Only after conflicts and a lagging cache are classified: those are
		// routine, and a pattern must never turn one into a dropped restart.
		c.metrics.IgnoredErrors.Inc()
		c.log.Warn("ignoring error by configuration", "workload", key.String(), "error", err)
		c.queue.Forget(key)
	default:
		retries := c.queue.NumRequeues(key)
		reason := "transient"
		if !isTransient(err) {
			reason = "persistent"
			c.reportPersistent(key, retries, err)
		}
		c.metrics.ReconcileErrors.WithLabelValues(reason).Inc()
		c.log.Error("reconcile failed; will retry", "workload", key.String(), "reason", reason,
			"retries", retries, "error", err)
		// Work is never dropped: the backoff caps at a minute, and the item
		// stays until it succeeds or the workload is gone.
		c.queue.AddRateLimited(key)
	}
	return true
}

// reportPersistent records an Event on the workload for the first failure and
// every tenth retry after it, so a lasting problem (RBAC, an admission webhook
// refusing the patch) is visible without flooding the API with events.
func (c *Controller) reportPersistent(key catalog.WorkloadKey, retries int, err error) {
	if c.events == nil || retries%10 != 0 {
		return
	}
	if w, ok := c.catalog.Workload(key); ok {
		c.events.Eventf(w, nil, corev1.EventTypeWarning, "RestartControllerFailed", "Patch",
			"restart-controller cannot update this workload (retrying with backoff): %v", err)
	}
}

func (c *Controller) ignored(err error) bool {
	msg := err.Error()
	for _, pattern := range c.cfg.Settings.IgnoredErrors {
		if strings.Contains(msg, pattern) {
			return true
		}
	}
	return false
}

func isTransient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded) ||
		apierrors.ReasonForError(err) == metav1.StatusReasonUnknown
}

// Reconcile brings one workload's applied checksums in line with its sources,
// restarting it when data its pods read has changed and its grace period is
// over. It reads downward, in phases: load what the decision reads, follow
// the last restart's rollout, decide (package decision), act on the verdict,
// report it. The only requeue is the verdict's, in requeue.
func (c *Controller) Reconcile(ctx context.Context, key catalog.WorkloadKey) error {
	w, ok := c.catalog.Workload(key)
	if ok {
		// Before the opt-in: a list whose every entry is bad opts nothing in.
		c.warnOnce(key, w, "InvalidSourceList", "Read", w.ListProblems)
	} else {
		c.warned.forget(key)
	}
	if !ok || !w.OptedIn {
		c.dryRun.forget(key)
		c.fleet.Forget(key)
		c.followed.forget(key)
		c.metrics.SetHeld(c.fleet.SetHeld(key, ""))
		return nil
	}
	if w.Problem != "" {
		c.log.Warn("cannot read references; skipping", "workload", key.String(), "problem", w.Problem)
		return nil
	}
	snap, err := c.load(ctx, key, w)
	if err != nil || snap == nil {
		return err
	}
	if snap.Fleet != nil {
		// The rollout of the last restart first: its outcome may hold or
		// release the restarts of others, and of this one.
		if wrote, err := c.follow(ctx, key, w, snap.Now); wrote || err != nil {
			return err
		}
	}
	v := c.decide(key, *snap)
	c.warnOnce(key, w, "RequiredSourceDeleted", "Restart", requiredGoneNotes(v.Plan.RequiredGone))
	c.requeue(key, v.Recheck)
	if err := c.act(ctx, key, snap.Workload, v); err != nil {
		return err
	}
	return nil
}

// load reads what the decision reads: the sources the workload reads (an
// API read for the keys of large ones), and the fleet's view, or nil when
// there is nothing to decide yet.
func (c *Controller) load(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState) (*decision.Snapshot, error) {
	dryRun := c.cfg.Settings.DryRun
	if dryRun {
		w = c.dryRun.overlay(key, w)
	}
	sources, err := c.sourcesFor(ctx, w)
	if err != nil {
		return nil, err
	}
	snap := &decision.Snapshot{Key: key, Workload: w, Sources: sources, Windows: c.windows, Now: c.now()}
	if dryRun {
		return snap, nil // a dry run does not pace
	}
	if behind, expires := c.fleet.Behind(key, w, snap.Now); behind {
		// Our last write is not in the cache yet; its update event brings
		// the workload back, or the reservation's expiry does.
		c.requeue(key, expires+10*time.Millisecond)
		return nil, nil
	}
	snap.Fleet = c.fleet.View(c.now, key)
	return snap, nil
}

// decide runs the decision. The fleet's view holds the fleet's lock from its
// first use until the restart's record is reserved, so two decisions never
// both take the last place of a wave.
func (c *Controller) decide(key catalog.WorkloadKey, snap decision.Snapshot) decision.Verdict {
	v := c.rules().Decide(snap)
	if view, ok := snap.Fleet.(*fleet.View); ok {
		view.SetWaiting(v.WaitsFor)
		if v.Action == decision.Restart {
			view.Reserve(v.LastRestart, v.At)
			if v.LastRestart.EndUnwritten() {
				c.followed.start(key, v.LastRestart.At, v.LastRestart.At.Add(deadlineOf(c.rolloutRules[key.Resource])))
			}
		}
		view.Unlock()
		c.fleet.SetWaitingForCap(key, v.Capped)
	}
	return v
}

// rules are the decision's rules, with the checksum key loaded (UseChecksums).
func (c *Controller) rules() decision.Rules { return decision.RulesOf(c.cfg, c.sums) }

// requeue is the one place a reconcile schedules the next decision of the
// workload without an event, after: the verdict's recheck (the end of a
// grace period, of the breaker's quiet time, a wave's recheck), a
// rollout's deadline, a reservation's expiry. (Errors are retried by the
// queue's rate limiter, in processNext; source events schedule readers for
// the end of the change's grace period, in sourceEvent.)
func (c *Controller) requeue(key catalog.WorkloadKey, after time.Duration) {
	if after > 0 {
		c.queue.AddAfter(key, after)
	}
}
