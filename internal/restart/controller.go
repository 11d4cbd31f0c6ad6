// Package restart is the controller: a queue of workload keys, and one
// reconcile per key that reads downward: load the snapshot, decide (package
// decision), act on the verdict, report it.
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/notify"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// Notifier takes notifications for sinks. Notify must never block: a slow
// sink must not delay a restart (notify.Notifier queues, or drops).
type Notifier interface{ Notify(notify.Message) }

// ExistsFunc asks the API server whether a source exists.
type ExistsFunc func(ctx context.Context, id catalog.SourceID) (bool, error)

// PatchFunc sends a merge patch to a workload.
type PatchFunc func(ctx context.Context, key catalog.WorkloadKey, body []byte) error

// KeyReader gives a large source's cached state, which keeps only the
// checksums of its whole data, the digests of the keys a workload reads
// (keyread.Reader reads them from the API server).
type KeyReader interface {
	Read(ctx context.Context, id catalog.SourceID, state *catalog.SourceState, keys []string) (*catalog.SourceState, error)
}

// Deps are everything the controller uses, built once, in order: the
// rules and the caches need the checksum key, loaded first.
type Deps struct {
	Config  *config.Config
	Rules   decision.Rules
	Catalog pacing.Catalog
	Pacing  *pacing.State
	// Client reads Jobs and writes what a runNow or recreate restart
	// writes beside the patch; Patch sends every merge patch.
	Client dynamic.Interface
	Patch  PatchFunc
	// Fresh reports whether this replica may still write: its leader lease
	// is certainly its own. It fences every write.
	Fresh  func() bool
	Exists ExistsFunc
	Keys   KeyReader
	// Events reports on the objects they concern, where `kubectl
	// describe` shows them.
	Events events.EventRecorder
	Notify Notifier
	// Metrics carries the queue's metrics provider too.
	Metrics *metrics.Metrics
	Log     hclog.Logger
	Clock   func() time.Time
}

// errCacheBehind makes the queue retry a workload soon: a source the cache
// does not hold yet exists, or holds older data than the API server.
var errCacheBehind = errors.New("the source cache is behind the API server")

// errLeaseStale refuses a write while the leader lease may have passed to
// another replica (Deps.Fresh); the queue retries, and the elector soon
// stops this replica's work altogether.
var errLeaseStale = errors.New("the leader lease may have expired: not writing")

// Controller reconciles one workload key at a time: the queue holds keys and
// the decision reads a snapshot. A reconcile calls the API only to read
// what the caches do not hold (the keys of a large source, an absence
// confirmed, a runNow restart's Job), to write what the verdict asks, and
// to report Events. Retries live in the queue.
type Controller struct {
	Deps
	grace *gracePeriods
	queue workqueue.TypedRateLimitingInterface[catalog.WorkloadKey]
	// templateFields lead to each kind's pod template.
	templateFields map[schema.GroupVersionResource][]string
	// backlog holds the start-up list until the queue has room (startup.go).
	backlog backlog
	// dryRun holds the patches a dry run simulates (dryrun.go).
	dryRun simulatedPatches
	// warned are the Warning Events about workloads' own state recorded
	// (warnings.go).
	warned warnings
	// standing is why each workload's due restart does not go (standing.go).
	standing standing
	// followed are the unwritten rollouts this process follows (followed.go).
	followed followed
}

// New builds a controller. The queue exists from the start so that events
// arriving while caches sync are kept until workers run.
func New(d Deps) (*Controller, error) {
	fields := map[schema.GroupVersionResource][]string{}
	for i, w := range d.Config.Workloads {
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
	return &Controller{
		Deps:           d,
		grace:          newGracePeriods(d.Config.Settings.GracePeriod),
		templateFields: fields,
		backlog:        newBacklog(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[catalog.WorkloadKey]{
			Name:            "workloads",
			MetricsProvider: d.Metrics.QueueMetrics(),
		}),
	}, nil
}

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
	now := c.Clock()
	due, merged := c.grace.Observe(id, now, created, changedKeys)
	c.Pacing.SourceChanged(id, now)
	c.Metrics.ChangesProcessed.Inc()
	if merged {
		c.Metrics.ChangesMerged.Inc()
	}
	for _, key := range c.Catalog.WorkloadsReading(id) {
		c.queue.AddAfter(key, due.Sub(now))
	}
}

// WorkloadChanged is called by the watcher when a workload appeared or changed
// in a way that matters to decisions, after the informer stored the change:
// wave memos read the workload again from the cache.
func (c *Controller) WorkloadChanged(key catalog.WorkloadKey) {
	c.Pacing.WorkloadCached(key)
	c.queue.Add(key)
}

// SourceAnnotated is called by the watcher when a source's release or ignore
// annotation changed, and SourceMembersChanged when a member of a source of
// lifecycle updatesOnly was created, deleted, or rewritten without a change
// of its data (not a change: no grace period opens, but the source's value
// may be another; a baseline only fills records not there yet): the readers
// are decided again at once.
func (c *Controller) SourceAnnotated(id catalog.SourceID) { c.decideReaders(id) }

// SourceMembersChanged: see SourceAnnotated.
func (c *Controller) SourceMembersChanged(id catalog.SourceID) { c.decideReaders(id) }

func (c *Controller) decideReaders(id catalog.SourceID) {
	for _, key := range c.Catalog.WorkloadsReading(id) {
		c.queue.Add(key)
	}
}

// Run processes the queue with the given number of workers until ctx ends.
// Then it stops taking items at once, even those already queued (the next
// leader, or this process at its next start, compares every workload anyway),
// and waits for the reconciles under way, giving them at most drainTimeout.
// Writes use writeCtx: cancelling it (the leader lease was lost) stops every
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
	c.Log.Info("stopping: finishing reconciles under way; queued work is left to the next start")
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
		c.Log.Warn("drain timed out; cancelling writes under way", "timeout", drainTimeout)
		cancelWrites()
		<-drained
	}
}

// Sweep publishes how many changes wait and forgets ended grace periods and
// the followed rollouts past their deadline until ctx ends. Every replica
// runs it, leader or not: a standby observes changes too, and its grace
// periods would otherwise grow for as long as it stands by.
func (c *Controller) Sweep(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) {
		now := c.Clock()
		c.Metrics.SetChangesWaiting(c.grace.Sweep(now))
		c.followed.sweep(now)
	}, c.Config.Settings.CheckPeriod)
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

	c.Metrics.Reconciling.Inc()
	err := c.Reconcile(writeCtx, key)
	c.Metrics.Reconciling.Dec()
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, errLeaseStale):
		c.Log.Warn("not writing: the leader lease may have passed to another replica", "workload", key.String())
		c.queue.AddRateLimited(key)
	case errors.Is(err, errCacheBehind):
		c.Log.Debug("source cache behind; deciding again shortly", "workload", key.String(), "error", err)
		c.queue.AddRateLimited(key)
	case apierrors.IsConflict(err):
		// The cache is behind the API server; decide again once it catches up.
		c.Metrics.ReconcileErrors.WithLabelValues("conflict").Inc()
		c.Log.Debug("conflict; retrying on fresh state", "workload", key.String())
		c.queue.AddRateLimited(key)
	case c.ignored(err):
		// Only after conflicts and a lagging cache are classified: those are
		// routine, and a pattern must never turn one into a dropped restart.
		c.Metrics.IgnoredErrors.Inc()
		c.Log.Warn("ignoring error by configuration", "workload", key.String(), "error", err)
		c.queue.Forget(key)
	default:
		retries := c.queue.NumRequeues(key)
		reason := "transient"
		if !isTransient(err) {
			reason = "persistent"
			c.reportPersistent(key, retries, err)
		}
		c.Metrics.ReconcileErrors.WithLabelValues(reason).Inc()
		c.Log.Error("reconcile failed; will retry", "workload", key.String(), "reason", reason,
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
	if retries%10 != 0 {
		return
	}
	if w, ok := c.Catalog.Workload(key); ok {
		c.Events.Eventf(w, nil, corev1.EventTypeWarning, "RestartControllerFailed", "Patch",
			"restart-controller cannot update this workload (retrying with backoff): %v", err)
	}
}

func (c *Controller) ignored(err error) bool {
	msg := err.Error()
	for _, pattern := range c.Config.Settings.IgnoredErrors {
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

// Reconcile brings one workload's applied checksums in line with its
// sources, restarting it when data its pods read has changed and every gate
// lets it go. It reads downward: load the snapshot, decide, act on the
// verdict, report what was done. The verdict says when to decide again.
func (c *Controller) Reconcile(ctx context.Context, key catalog.WorkloadKey) error {
	snap, err := c.load(ctx, key)
	if err != nil {
		return err
	}
	v := c.decide(snap)
	c.requeue(key, v.Until)
	done, err := c.act(ctx, snap, v)
	if err != nil {
		return err
	}
	c.report(snap, v, done)
	return nil
}

// decide runs the decision on the snapshot. A due restart's first verdict
// asks for the pacing facts of the changes it delivers: the controller then
// takes the pacing lock, gathers them, finishes the decision (Pace) and
// notes what the verdict reserves, under that one lock, so that two
// decisions never both take the last place of a wave. Every other
// decision never takes it.
func (c *Controller) decide(snap decision.Snapshot) decision.Verdict {
	v := c.Rules.Decide(snap)
	if !v.NeedsPacing {
		if snap.Pace {
			c.Pacing.Decided(snap.Key)
		}
		return v
	}
	locked := c.Pacing.Lock()
	defer locked.Unlock()
	facts := locked.Facts(snap.Key, snap.Workload.State.References, v.Deliver, snap.Sources, c.Clock())
	snap.Pacing = &facts
	v = c.Rules.Pace(snap, v)
	locked.Note(snap.Key, v)
	return v
}

// requeue is the one place a reconcile schedules the next decision of the
// workload without an event: when the verdict says (the end of a grace
// period, a window, an interval, the breaker's quiet time, a wave's
// recheck, a rollout's deadline, a reservation's expiry). Errors are
// retried by the queue's rate limiter (processNext); source events schedule
// readers for the end of the change's grace period (sourceEvent).
func (c *Controller) requeue(key catalog.WorkloadKey, at time.Time) {
	if !at.IsZero() {
		c.queue.AddAfter(key, max(at.Sub(c.Clock()), time.Millisecond))
	}
}
