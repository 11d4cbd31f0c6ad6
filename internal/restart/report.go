package restart

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/notify"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// report says what a verdict did: in the log, in Events that `kubectl
// describe` shows the workload's owners, in metrics and notifications. It
// names sources and the keys read, never a value. wrote: act wrote what the
// verdict asked (a hold already in place is not reported again).
func (c *Controller) report(s decision.Snapshot, v decision.Verdict, wrote bool) {
	key, w := s.Key, s.Workload.State
	log := c.Log.With("workload", key.String())
	if w == nil {
		c.warned.forget(key)
	} else {
		// Before the opt-in: a list whose every entry is bad opts nothing in.
		c.warnOnce(key, w, "InvalidSourceList", "Read", w.ListProblems)
	}
	for _, warning := range append(v.Warnings, v.Plan.Warning) {
		if warning != "" {
			log.Warn(warning)
		}
	}
	if v.Plan.Applied != nil {
		// Compared: a required source deleted is said once while it is gone.
		c.warnOnce(key, w, "RequiredSourceDeleted", "Restart", requiredGoneNotes(v.Plan.RequiredGone))
	}
	if e := v.Ended; e != nil && (wrote || !e.Written) {
		c.reportEnd(log, w, key, e, s.Now)
	}
	if w != nil {
		c.warnOnce(key, w, "InvalidAnnotation", "Read", v.Invalid)
	}
	c.reportStanding(log, key, w, v, wrote)
	switch v.Action {
	case decision.Hold:
		return
	case decision.Queue:
		log.Debug("restart waits", "why", strings.Join(v.Reasons, "; "))
	case decision.Nothing:
		if v.Gate == decision.GateReferences {
			log.Warn("cannot read references; skipping", "problem", w.Problem)
		}
	}
	if len(v.OptedOut) > 0 {
		log.Info("recording changes whose restart is opted out", "sources", fmt.Sprint(v.OptedOut))
	}
	if wrote && (v.Action == decision.Restart || v.Action == decision.Record) {
		c.reportWrite(log, w, key, v, c.Config.Settings.DryRun)
	}
}

// reportStanding counts the held and waiting restarts, and says when a
// hold is written and when a wait for a window or an interval begins: a
// wait is not a hold (a Normal Event, never a Warning).
func (c *Controller) reportStanding(log hclog.Logger, key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict, wrote bool) {
	if c.Config.Settings.DryRun && v.Action != decision.Wait || v.Action == decision.EndRollout || v.Gate == decision.GateOwnWrite {
		return // the standing of the decision before stands
	}
	var kind record.HoldKind
	if v.Action == decision.Hold {
		kind = v.Hold.Kind
	}
	began := c.standing.set(key, kind, waitReason(v), c.Metrics.SetStanding)
	switch {
	case v.Action == decision.Hold && wrote:
		c.reportHold(log, key, w, v.Hold)
	case began:
		why := strings.Join(v.Reasons, "; ")
		log.Info("restart waits", "why", why, "until", v.Until)
		c.event(w, corev1.EventTypeNormal, "RestartWaiting", "Restart", "Restart due, and waits: %s", why)
	}
}

// reportWrite counts, logs and tells what a record or restart wrote, or in
// a dry run what it would have written.
func (c *Controller) reportWrite(log hclog.Logger, w *catalog.WorkloadState, key catalog.WorkloadKey, v decision.Verdict, dryRun bool) {
	plan, now := v.Plan, v.At
	if dryRun {
		log = log.With("dry_run", true)
	}
	c.Metrics.AnnotationUpdates.Inc()
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
	c.Metrics.Restarts.Inc()
	changed := make([]string, len(plan.Changed))
	sources := make([]notify.Source, len(plan.Changed))
	for i, id := range plan.Changed {
		sources[i] = c.changedRead(id, w.References)
		changed[i] = sources[i].String()
		if _, exists := c.Catalog.Source(id); !exists {
			changed[i] = id.String() + " (deleted)"
		}
		if opened, ok := c.grace.Opened(id); ok {
			c.Metrics.ChangeToRestart.Observe(now.Sub(opened).Seconds())
		}
	}
	log.Info(restartVerb.say(dryRun), "changed", strings.Join(changed, "; "))
	c.event(w, corev1.EventTypeNormal, restartVerb.reasonFor(dryRun), "Restart",
		"%s to pick up changed data: %s", capitalize(restartVerb.say(dryRun)), strings.Join(changed, "; "))
	if plan.NotRolled != "" {
		c.reportNotRolled(log, w, plan.NotRolled, changed, dryRun)
	}
	if !dryRun {
		c.tell(notify.Restart, key, sources, "restarted", plan.NotRolled, now) // a reason: why it replaces no pods now
	}
}

// reportHold says once, in the log, as a RestartHeld Event and a
// notification, that a restart is held.
func (c *Controller) reportHold(log hclog.Logger, key catalog.WorkloadKey, w *catalog.WorkloadState, hold *record.Hold) {
	var note string
	var sources []notify.Source // what the notification names: the halted change's source
	switch hold.Kind {
	case record.HoldWave:
		sources = []notify.Source{{ID: hold.Source}}
		id, _ := catalog.ParseSourceID(hold.Source) // a wave hold names its source (record.ParseHold)
		log.Warn("restart held: a rollout of the same change failed", "source", hold.Source, "change", hold.Change, "failed", hold.Cause)
		note = fmt.Sprintf("Restart held: the change %s of %s is halted, a rollout of it failed: %s. It goes on by itself when that rollout "+
			"completes after all, or when %s changes again; to let this change go on now: %s",
			hold.Change, hold.Source, hold.Cause, hold.Source, decision.ReleaseCommand(c.Config.Annotations.Release, id, hold.Change))
	default:
		log.Warn("restart held by the breaker", "cause", hold.Cause, "quiet", c.Config.Breaker.Quiet)
		note = fmt.Sprintf("Restart held: %s; it restarts once the sources it reads have been still for %s", hold.Cause, c.Config.Breaker.Quiet)
	}
	c.event(w, corev1.EventTypeWarning, "RestartHeld", "Hold", "%s", note)
	c.tell(notify.Hold, key, sources, "held", note, c.Clock())
}

// reportEnd counts, logs and tells (an Event, a notification for a failure
// or a recovery) how the rollout of the last restart ended.
func (c *Controller) reportEnd(log hclog.Logger, w *catalog.WorkloadState, key catalog.WorkloadKey, e *decision.Ended, now time.Time) {
	rec := e.Record
	restarted := rec.At.UTC().Format(time.RFC3339)
	if e.Recovered {
		log.Info("failed rollout recovered: complete after all; the changes it halted go on", "failed", rec.Reason)
		c.event(w, corev1.EventTypeNormal, "RolloutRecovered", "Rollout",
			"Rollout of the restart at %s, judged failed (%s), is complete after all; the restarts it held go on", restarted, rec.Reason)
		c.tell(notify.RolloutRecovered, key, notify.IDs(rec.Sources), "recovered",
			"complete after it was judged failed ("+rec.Reason+"); the restarts it held go on", now)
		return
	}
	took := now.Sub(rec.At)
	outcome := string(e.Verdict.Result)
	c.Metrics.Rollouts.WithLabelValues(outcome).Inc()
	c.Metrics.RolloutDuration.WithLabelValues(outcome).Observe(took.Seconds())
	log = log.With("after", took.Round(time.Millisecond))
	switch e.Verdict.Result {
	case rollout.ResultComplete:
		log.Info("rollout complete")
		c.event(w, corev1.EventTypeNormal, "RolloutComplete", "Rollout",
			"Rollout of the restart at %s complete after %s", restarted, took.Round(time.Second))
	case rollout.ResultFailed:
		log.Warn("rollout failed", "reason", e.Verdict.Reason, "message", e.Verdict.Message)
		c.event(w, corev1.EventTypeWarning, "RolloutFailed", "Rollout",
			"Rollout of the restart at %s failed after %s: %s: %s", restarted, took.Round(time.Second), e.Verdict.Reason, e.Verdict.Message)
		c.tell(notify.RolloutFailed, key, notify.IDs(rec.Sources), "failed", e.Verdict.Reason+": "+e.Verdict.Message, now)
	default:
		log.Info("rollout not followed: the workload does not roll its pods by itself", "reason", e.Verdict.Reason)
	}
}

// reportNotRolled says, in the log and as a Warning Event on the workload,
// that a restart patched a template that replaces no pods now (a paused
// Deployment, an OnDelete StatefulSet): the running pods keep the old data
// until they are replaced some other way. The checksums are recorded all the
// same: they describe the template, which every pod created from now on reads.
func (c *Controller) reportNotRolled(log hclog.Logger, w *catalog.WorkloadState, why string, changed []string, dryRun bool) {
	updated, reason := notRolledVerb.say(dryRun), notRolledVerb.reasonFor(dryRun)
	log.Warn("restart not rolled: the pod template was "+updated+" but replaces no pods; running pods keep the old data",
		"because", why, "changed", strings.Join(changed, "; "))
	c.event(w, corev1.EventTypeWarning, reason, "Restart",
		"pod template %s for changed %s, but %s: running pods keep the old data until they are replaced",
		updated, strings.Join(changed, "; "), why)
}

// Event reasons and log words, as done and as a dry run says them.
type verb struct{ done, dryRun, reason, dryRunReason string }

var (
	restartVerb   = verb{"restarted", "would restart", "Restarted", "WouldRestart"}
	recordVerb    = verb{"recorded", "would record", "RecordedChecksums", "WouldRecordChecksums"}
	notRolledVerb = verb{"updated", "would be updated", "RestartNotRolled", "WouldNotRoll"}
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
	c.Events.Eventf(w, nil, eventtype, reason, action, note, args...)
}

// tell hands a notification about the workload to the notifier.
func (c *Controller) tell(kind notify.Kind, key catalog.WorkloadKey, sources []notify.Source, outcome, reason string, at time.Time) {
	c.Notify.Notify(notify.Message{
		Kind:     kind,
		Workload: notify.Workload{Group: key.Resource.Group, Resource: key.Resource.Resource, Namespace: key.Namespace, Name: key.Name},
		Sources:  sources, Outcome: outcome, Reason: reason, Time: at.UTC(),
	})
}

// changedRead is, for a source whose change causes a restart, the keys
// that changed among those the workload reads (notify.Changed): what the
// Restarted Event and the restart notification both say.
func (c *Controller) changedRead(id catalog.SourceID, refs []catalog.Reference) notify.Source {
	var read []string // nil: every key
	for _, r := range refs {
		if r.ID == id {
			read = r.Keys
		}
	}
	changed, known := c.grace.ChangedKeys(id)
	return notify.Changed(id.String(), read, changed, known)
}
