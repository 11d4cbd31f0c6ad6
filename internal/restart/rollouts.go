package restart

import (
	"context"
	"sync"
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
//
// The completion of an unpaced restart is not written
// (pacing.LastRestart.EndUnwritten): the workload's status shows it to
// every later decision. With replicas 0 a rollout ends at once, and that
// write was a second PATCH per restart.
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
	rule := c.rolloutRules[key.Resource]
	unwritten := rec.EndUnwritten()
	if unwritten && !c.followed.follows(key, rec.At, status.Phase, now, rec.At.Add(deadlineOf(rule))) {
		return false, nil
	}
	status, poll := strategy.Status(ctx, c.client, key.Namespace, rec, status)
	verdict := rule.Judge(status, rec.At, now)
	if verdict.Result == rollout.ResultPending {
		// The deadline: decide again then, if no status change comes first.
		wait := verdict.Wait + 10*time.Millisecond
		if poll > 0 {
			wait = min(wait, poll)
		}
		c.requeue(key, wait)
		return false, nil
	}
	if unwritten && verdict.Result != rollout.ResultFailed {
		// Its status says so to every later decision. A change it delivered
		// may have become paced since (more of its readers became due), and
		// counts it in flight: the readers waiting for that wave are woken
		// as by a written end, or they would wait for their recheck. Only
		// when one waits: a fan-out of unpaced changes has nobody to wake,
		// and would evaluate the waves of every source at every end.
		c.followed.end(key)
		c.reportEnd(w, key, rec, verdict, now)
		if c.fleet.AnyWaiting(rec.Sources) {
			c.wake(rec.Sources, now)
		}
		return false, nil
	}
	done := rec.WithResult(verdict, now)
	if err := c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.cfg.Annotations.Rollout: pacing.Encode(done)}); err != nil {
		return true, err
	}
	c.followed.forget(key)
	// Until the cache shows the result, wave decisions see it here.
	c.fleet.Reserve(key, done, now)
	c.reportEnd(w, key, rec, verdict, now)
	c.wake(rec.Sources, now)
	return true, nil
}

// reportEnd counts, logs and tells (an Event, a notification for a failure)
// how the rollout of the restart rec ended.
func (c *Controller) reportEnd(w *catalog.WorkloadState, key catalog.WorkloadKey, rec *pacing.LastRestart, verdict rollout.Verdict, now time.Time) {
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

// deadlineOf is how long after its restart a rollout of the rule's kind
// counts as failed (rollout.Rule.Judge).
func deadlineOf(rule rollout.Rule) time.Duration {
	if rule.Deadline > 0 {
		return rule.Deadline
	}
	return rollout.DefaultDeadline
}

// followed are the rollouts whose completion goes unwritten
// (pacing.LastRestart.EndUnwritten) that this process follows: those it
// restarted, and those it found still rolling inside their deadline (a
// rollout started by the process before it). Only a followed rollout is
// judged. Its record stays without a result after it completed, so a
// status that leaves Complete later (a pod lost, an unpause) would look
// like a rollout still under way: judged then, it would be reported again,
// or failed once past its deadline. An ended rollout is kept until its
// deadline, so that it is not adopted again meanwhile; one past its deadline
// is never adopted. What this costs: a process that starts after such a
// rollout passed its deadline does not report its failure (it cannot tell
// one from a completion its predecessor saw), and a completion seen first
// by a new process is not reported again. Nothing else reads it: wave
// decisions and the cap read the record and the workload's status.
type followed struct {
	mu    sync.Mutex
	byKey map[catalog.WorkloadKey]followedRollout
}

type followedRollout struct {
	// at is the restart's time (its record's At); deadline when it fails.
	at, deadline time.Time
	ended        bool
}

// followedLinger is how long past its deadline an entry whose rollout was
// never judged is kept: a restart whose patch failed, say.
const followedLinger = time.Hour

// start follows the rollout of a restart at at, from its decision.
func (f *followed) start(key catalog.WorkloadKey, at, deadline time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byKey == nil {
		f.byKey = map[catalog.WorkloadKey]followedRollout{}
	}
	f.byKey[key] = followedRollout{at: at, deadline: deadline}
}

// follows reports whether the rollout of the restart at at is to be judged
// now: it is followed and has not ended, or it was not known and is still
// rolling (phase) before its deadline, which adopts it.
func (f *followed) follows(key catalog.WorkloadKey, at time.Time, phase rollout.Phase, now, deadline time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.byKey[key]; ok && e.at.Equal(at) {
		return !e.ended
	}
	if !now.Before(deadline) || phase == rollout.Complete || phase == rollout.NotRolling {
		return false
	}
	if f.byKey == nil {
		f.byKey = map[catalog.WorkloadKey]followedRollout{}
	}
	f.byKey[key] = followedRollout{at: at, deadline: deadline}
	return true
}

// end notes that the followed rollout of the workload has ended.
func (f *followed) end(key catalog.WorkloadKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.byKey[key]; ok {
		e.ended = true
		f.byKey[key] = e
	}
}

// forget drops the workload's rollout: its end was written, or the workload
// is gone or opted out.
func (f *followed) forget(key catalog.WorkloadKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byKey, key)
}

// sweep drops the ended rollouts past their deadline, and those never
// judged long past it: past its deadline, no rollout is adopted again.
func (f *followed) sweep(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, e := range f.byKey {
		if now.After(e.deadline) && (e.ended || now.After(e.deadline.Add(followedLinger))) {
			delete(f.byKey, key)
		}
	}
}
