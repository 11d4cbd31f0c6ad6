package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hashicorp/go-hclog"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/notify"
	"github.com/restart-controller/restart-controller/internal/pacing"
	"github.com/restart-controller/restart-controller/internal/strategy"
)

// holdRestart keeps a held restart from happening: it writes the hold on the
// workload unless it is there already, and says so once, in the log and as a
// RestartHeld Event.
func (c *Controller) holdRestart(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, hold *pacing.Hold) error {
	if old, _ := pacing.ParseHold(w.Hold); old != nil && old.Kind == hold.Kind && old.Source == hold.Source &&
		old.Change == hold.Change && old.Cause == hold.Cause {
		c.metrics.SetHeld(c.fleet.setHeld(key, hold.Kind))
		return nil
	}
	if err := c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Hold: pacing.Encode(hold)}); err != nil {
		return err
	}
	// Counted once written: the gauge never counts a hold the workload does
	// not carry.
	c.metrics.SetHeld(c.fleet.setHeld(key, hold.Kind))
	log := c.log.With("workload", key.String())
	var note string
	var sources []notify.Source // what the notification names: the halted change's source
	switch hold.Kind {
	case pacing.HoldWave:
		id, _ := decision.ParseSourceID(hold.Source)
		sources = []notify.Source{{ID: hold.Source}}
		log.Warn("restart held: a rollout of the same change failed", "source", hold.Source, "change", hold.Change, "failed", hold.Cause)
		note = fmt.Sprintf("Restart held: the change %s of %s is halted, a rollout of it failed: %s. It goes on by itself when that rollout "+
			"completes after all, or when %s changes again; to let this change go on now: kubectl annotate %s %s -n %s %s=%s --overwrite",
			hold.Change, hold.Source, hold.Cause, hold.Source, id.Kind, id.Name, id.Namespace, c.cfg.Annotations.Release, hold.Change)
	default:
		log.Warn("restart held by the breaker", "cause", hold.Cause, "quiet", c.cfg.Breaker.Quiet)
		note = fmt.Sprintf("Restart held: %s; it restarts once the sources it reads have been still for %s", hold.Cause, c.cfg.Breaker.Quiet)
	}
	c.event(w, corev1.EventTypeWarning, "RestartHeld", "Hold", "%s", note)
	c.tell(notify.Hold, key, sources, "held", note, c.now())
	return nil
}

// patchAnnotations writes annotations (nil removes one) on the workload as
// cached at resourceVersion rv: a conflict means the cache is behind, and
// the workload is decided again on fresh state.
func (c *Controller) patchAnnotations(ctx context.Context, key catalog.WorkloadKey, rv string, annotations map[string]interface{}) error {
	body, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"resourceVersion": rv, "annotations": annotations},
	})
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	start := time.Now()
	err = c.patch(ctx, key, body)
	c.metrics.PatchDuration.Observe(time.Since(start).Seconds())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching %s: %w", key, err)
	}
	return nil
}

// act carries out the verdict: writes the hold, the patch, or the removal of
// a hold that holds nothing any more, and reports what it did.
func (c *Controller) act(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict) error {
	log := c.log.With("workload", key.String())
	if v.Plan.Warning != "" {
		log.Warn(v.Plan.Warning)
	}
	switch v.Action {
	case decision.Hold:
		return c.holdRestart(ctx, key, w, v.Hold)
	case decision.Queue:
		log.Debug("restart waits", "why", strings.Join(v.Reasons, "; "))
		c.metrics.SetHeld(c.fleet.setHeld(key, ""))
		if w.Hold != "" && v.Unhold {
			return c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Hold: nil})
		}
		return nil
	}
	if !c.cfg.Settings.DryRun {
		c.metrics.SetHeld(c.fleet.setHeld(key, ""))
	}
	if len(v.OptedOut) > 0 {
		log.Info("recording changes whose restart is opted out", "sources", fmt.Sprint(v.OptedOut))
	}
	if v.Action != decision.Restart && v.Action != decision.Record {
		return nil
	}
	if err := c.confirmAbsent(ctx, key, v.Plan.Unverified); err != nil {
		return err
	}
	if c.cfg.Settings.DryRun {
		c.report(w, key, v.Plan, v.At, true)
		c.dryRun.remember(key, v.Plan)
		return nil
	}
	if strategy.OtherWrites(v.Plan) {
		return c.restartBy(ctx, key, w, v) // strategy.go
	}
	body, err := strategy.BuildPatch(c.templateFields[key.Resource], c.cfg.Annotations, w, v.Plan, v.At)
	if err != nil {
		c.fleet.unreserve(key)
		return fmt.Errorf("building patch for %s: %w", key, err)
	}
	start := time.Now()
	err = c.patch(ctx, key, body)
	c.metrics.PatchDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		c.fleet.unreserve(key)
	}
	if apierrors.IsNotFound(err) {
		return nil // gone: no restart was refused
	}
	if v.Plan.Restart && !errors.Is(err, errLeaseStale) {
		c.metrics.RestartPatched(key.Namespace, err == nil)
	}
	if err != nil {
		return fmt.Errorf("patching %s: %w", key, err)
	}
	c.report(w, key, v.Plan, v.At, false)
	return nil
}

// confirmAbsent asks the API server whether sources the plan newly records
// as absent really are: the cache of sources may lag behind that of
// workloads.
func (c *Controller) confirmAbsent(ctx context.Context, key catalog.WorkloadKey, ids []catalog.SourceID) error {
	for _, id := range ids {
		found, err := c.exists(ctx, id)
		if err != nil {
			c.fleet.unreserve(key)
			return fmt.Errorf("confirming that %s does not exist: %w", id, err)
		}
		if found {
			c.fleet.unreserve(key)
			return fmt.Errorf("%s: %w", id, errCacheBehind)
		}
	}
	return nil
}

// PatchWith makes decisions send their patches through a metadata client:
// the API server then answers with the workload's metadata alone, as
// protobuf, instead of the whole object as JSON. At 10,000 workloads,
// decoding those answers through the dynamic client was 13% of the CPU of
// the start-up (the first recording patches every workload) and most of
// its garbage. The patch sent is the same.
func (c *Controller) PatchWith(m metadata.Interface) { c.meta = m }

// errLeaseStale refuses a write while the leader lease may have passed to
// another replica (WriteOnlyWhile); the queue retries, and the elector
// soon stops this replica's work altogether.
var errLeaseStale = errors.New("the leader lease may have expired: not writing")

// WriteOnlyWhile makes every write of the controller first ask fresh (the
// leader lease is still this replica's, by the monotonic clock), before Run.
func (c *Controller) WriteOnlyWhile(fresh func() bool) { c.fresh = fresh }

// patch sends a decision's merge patch: every write to a workload.
func (c *Controller) patch(ctx context.Context, key catalog.WorkloadKey, body []byte) error {
	if c.fresh != nil && !c.fresh() {
		return errLeaseStale
	}
	opts := metav1.PatchOptions{FieldManager: "restart-controller"}
	if c.meta != nil {
		_, err := c.meta.Resource(key.Resource).Namespace(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, body, opts)
		return err
	}
	_, err := c.client.Resource(key.Resource).Namespace(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, body, opts)
	return err
}

// report counts, logs and tells the workload's owners (an Event that
// `kubectl describe` shows) what a plan did, or in a dry run what it would
// have done. It names sources and the keys read, never a value.
func (c *Controller) report(w *catalog.WorkloadState, key catalog.WorkloadKey, plan decision.Plan, now time.Time, dryRun bool) {
	log := c.log.With("workload", key.String())
	if dryRun {
		log = log.With("dry_run", true)
	}
	c.metrics.AnnotationUpdates.Inc()
	if !plan.Restart {
		if w.HasApplied {
			log.Debug(recordVerb.say(dryRun) + " applied checksums")
			return
		}
		log.Info(recordVerb.say(dryRun)+" checksums on first sight", "sources", len(plan.Applied))
		c.event(w, corev1.EventTypeNormal, recordVerb.reasonFor(dryRun), "Record",
			"%s the checksums of the data its pods read from %d source(s), to restart it when that data changes",
			capitalize(recordVerb.say(dryRun)), len(plan.Applied))
		return
	}
	c.metrics.Restarts.Inc()
	changed := make([]string, len(plan.Changed))
	sources := make([]notify.Source, len(plan.Changed))
	for i, id := range plan.Changed {
		sources[i] = c.changedRead(id, w.References)
		changed[i] = sources[i].String()
		if _, exists := c.catalog.Source(id); !exists {
			changed[i] = id.String() + " (deleted)"
		}
		if opened, ok := c.windows.Opened(id); ok {
			c.metrics.ChangeToRestart.Observe(now.Sub(opened).Seconds())
		}
	}
	log.Info(restartVerb.say(dryRun), "changed", strings.Join(changed, "; "))
	c.event(w, corev1.EventTypeNormal, restartVerb.reasonFor(dryRun), "Restart",
		"%s to pick up changed data: %s", capitalize(restartVerb.say(dryRun)), strings.Join(changed, "; "))
	if plan.NotRolled != "" {
		c.reportNotRolled(log, w, plan.NotRolled, changed, dryRun)
	}
	c.tell(notify.Restart, key, sources, "restarted", plan.NotRolled, now) // a reason: why it replaces no pods now
}

// Event reasons and log words, as done and as a dry run says them.
type verb struct{ done, dryRun, reason, dryRunReason string }

var (
	restartVerb = verb{"restarted", "would restart", "Restarted", "WouldRestart"}
	recordVerb  = verb{"recorded", "would record", "RecordedChecksums", "WouldRecordChecksums"}
)

func (v verb) say(dryRun bool) string {
	if dryRun {
		return v.dryRun
	}
	return v.done
}

func (v verb) reasonFor(dryRun bool) string {
	if dryRun {
		return v.dryRunReason
	}
	return v.reason
}

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func (c *Controller) event(w *catalog.WorkloadState, eventtype, reason, action, note string, args ...interface{}) {
	if c.events != nil {
		c.events.Eventf(w, nil, eventtype, reason, action, note, args...)
	}
}

// reportNotRolled says, in the log and as a Warning Event on the workload,
// that a restart patched a template that replaces no pods now (a paused
// Deployment, an OnDelete StatefulSet): the running pods keep the old data
// until they are replaced some other way. The checksums are recorded all the
// same: they describe the template, which every pod created from now on reads.
func (c *Controller) reportNotRolled(log hclog.Logger, w *catalog.WorkloadState, why string, changed []string, dryRun bool) {
	updated, reason := "updated", "RestartNotRolled"
	if dryRun {
		updated, reason = "would be updated", "WouldNotRoll"
	}
	log.Warn("restart not rolled: the pod template was "+updated+" but replaces no pods; running pods keep the old data",
		"because", why, "changed", strings.Join(changed, "; "))
	c.event(w, corev1.EventTypeWarning, reason, "Restart",
		"pod template %s for changed %s, but %s: running pods keep the old data until they are replaced",
		updated, strings.Join(changed, "; "), why)
}
