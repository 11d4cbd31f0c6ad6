package restart

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/notify"
	"github.com/restart-controller/restart-controller/internal/pacing"
	"github.com/restart-controller/restart-controller/internal/rollout"
	"github.com/restart-controller/restart-controller/internal/strategy"
)

// follow judges the rollout of the workload's last restart, if it is still
// followed, and records its outcome on the workload once there is one. It
// reports whether it wrote: the decision then waits for the cache to show
// the write (the update enqueues the workload again).
func (c *Controller) follow(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, now time.Time) (bool, error) {
	rec, err := pacing.ParseLastRestart(w.LastRestart)
	if err != nil {
		c.log.Warn("unreadable rollout record; the next restart replaces it", "workload", key.String(), "error", err)
		return false, nil
	}
	status := w.Rollout
	if w.NotRolled != "" {
		status = rollout.Status{Phase: rollout.NotRolling, Reason: "NotRolled", Message: w.NotRolled}
	}
	if rec != nil && rec.Result == rollout.ResultFailed {
		if rec.Job != "" {
			return c.followFailedJob(ctx, key, w, rec, now)
		}
		if status.Phase == rollout.Complete {
			return true, c.recovered(ctx, key, w, rec, now)
		}
	}
	if !rec.InFlight() {
		return false, nil
	}
	status, poll := strategy.Status(ctx, c.client, key.Namespace, rec, status)
	verdict := c.rolloutRules[key.Resource].Judge(status, rec.At, now)
	if verdict.Result == rollout.ResultPending {
		// The deadline: decide again then, if no status change comes first.
		wait := verdict.Wait + 10*time.Millisecond
		if poll > 0 {
			wait = min(wait, poll)
		}
		c.requeue(key, wait)
		return false, nil
	}
	done := rec.WithResult(verdict, now)
	if err := c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Rollout: pacing.Encode(done)}); err != nil {
		return true, err
	}
	// Until the cache shows the result, wave decisions see it here.
	c.fleet.Reserve(key, done, now)
	took := now.Sub(rec.At)
	outcome := string(verdict.Result)
	c.metrics.Rollouts.WithLabelValues(outcome).Inc()
	c.metrics.RolloutDuration.WithLabelValues(outcome).Observe(took.Seconds())
	log := c.log.With("workload", key.String(), "after", took.Round(time.Millisecond))
	restarted := rec.At.UTC().Format(time.RFC3339)
	switch verdict.Result {
	case rollout.ResultComplete:
		log.Info("rollout complete")
		c.event(w, corev1.EventTypeNormal, "RolloutComplete", "Rollout",
			"Rollout of the restart at %s complete after %s", restarted, took.Round(time.Second))
	case rollout.ResultFailed:
		log.Warn("rollout failed", "reason", verdict.Reason, "message", verdict.Message)
		c.event(w, corev1.EventTypeWarning, "RolloutFailed", "Rollout",
			"Rollout of the restart at %s failed after %s: %s: %s", restarted, took.Round(time.Second), verdict.Reason, verdict.Message)
		c.tell(notify.RolloutFailed, key, notify.IDs(rec.Sources), "failed", verdict.Reason+": "+verdict.Message, now)
	default:
		log.Info("rollout not followed: the workload does not roll its pods by itself", "reason", verdict.Reason)
	}
	c.wake(rec.Sources, now)
	return true, nil
}

// followFailedJob follows the Job a runNow restart started after it was
// judged failed at its deadline: the Job may still complete, and no event of
// the workload says so, so the Job is read every strategy.JobPoll until it
// ends. Complete, the record recovers; failed or deleted, it stands (a Job
// that failed by itself ended; its record says so and is not followed).
func (c *Controller) followFailedJob(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, rec *pacing.LastRestart, now time.Time) (bool, error) {
	if rec.Reason != rollout.ReasonDeadlineExceeded {
		return false, nil
	}
	status, poll := strategy.Status(ctx, c.client, key.Namespace, rec, rollout.Status{})
	switch status.Phase {
	case rollout.Complete:
		return true, c.recovered(ctx, key, w, rec, now)
	case rollout.Progressing:
		c.requeue(key, poll)
	}
	return false, nil
}

// recovered records that the rollout of a restart judged failed has
// completed since (its pods became ready after the deadline, say): the
// record's result becomes complete, which ends the halt of the changes it
// delivered, so the readers those halts held go on in their waves without
// anyone releasing them.
func (c *Controller) recovered(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, rec *pacing.LastRestart, now time.Time) error {
	done := rec.WithResult(rollout.Verdict{Result: rollout.ResultComplete, Reason: "Recovered",
		Message: "complete after it was judged failed (" + rec.Reason + ")"}, now)
	if err := c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Rollout: pacing.Encode(done)}); err != nil {
		return err
	}
	c.fleet.Reserve(key, done, now)
	restarted := rec.At.UTC().Format(time.RFC3339)
	c.log.Info("failed rollout recovered: complete after all; the changes it halted go on", "workload", key.String(),
		"failed", rec.Reason)
	c.event(w, corev1.EventTypeNormal, "RolloutRecovered", "Rollout",
		"Rollout of the restart at %s, judged failed (%s), is complete after all; the restarts it held go on", restarted, rec.Reason)
	c.tell(notify.RolloutRecovered, key, notify.IDs(rec.Sources), "recovered",
		"complete after it was judged failed ("+rec.Reason+"); the restarts it held go on", now)
	c.wake(rec.Sources, now)
	return nil
}

// wake enqueues, for each source a rollout that ended had delivered, the
// readers that may move now (fleet.Movable).
func (c *Controller) wake(sources map[string]string, now time.Time) {
	for _, key := range c.fleet.Movable(sources, now) {
		c.queue.Add(key)
	}
}
