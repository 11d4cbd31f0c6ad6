package decision

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/rollout"
)

// judgeRollout judges the rollout of the workload's last restart, if one is
// under way or was judged failed, against its kind's rule and deadline. It
// returns its end when there is one (to write, or for an unpaced restart
// only to report), what to remember of the rollouts followed, and when to
// judge again (the deadline, or a running Job's next read).
//
// The completion of an unpaced restart is not written
// (record.LastRestart.EndUnwritten): the workload's status shows it to every
// later decision. With replicas 0 a rollout ends at once, and that write was
// a second PATCH per restart. Only the process that follows such a rollout
// judges it (Snapshot.Rollout.Followed): one that finds it still rolling
// inside its deadline adopts it. Its record stays without a result after it
// completed, so a status that leaves Complete later (a pod lost, an unpause)
// would otherwise look like a rollout still under way, reported again or
// failed at its deadline.
func (r Rules) judgeRollout(s Snapshot) (*Ended, Follow, time.Time) {
	rec := s.Workload.LastRestart
	if !s.Pace || rec == nil {
		return nil, Follow{}, time.Time{}
	}
	status := RolloutStatus(s.Workload.State)
	if rec.Job != "" {
		if s.Rollout.Job == nil {
			// A runNow restart's rollout is its Job's: not judged
			// without it (explain does not read Jobs).
			return nil, Follow{}, time.Time{}
		}
		status = *s.Rollout.Job
	}
	var poll time.Time
	if rec.Job != "" && s.Rollout.JobPoll > 0 && status.Phase == rollout.Progressing {
		poll = s.Now.Add(s.Rollout.JobPoll)
	}
	if rec.Result == rollout.ResultFailed {
		// A failed rollout is still followed: completing after all, it
		// recovers, and the changes it halted go on. A failed Job is read
		// only while it may still complete: past its deadline.
		if rec.Job != "" && rec.Reason != rollout.ReasonDeadlineExceeded {
			return nil, Follow{}, time.Time{}
		}
		if status.Phase != rollout.Complete {
			return nil, Follow{}, poll
		}
		v := rollout.Verdict{Result: rollout.ResultComplete, Reason: "Recovered", Message: "complete after it was judged failed (" + rec.Reason + ")"}
		return &Ended{Record: rec.WithResult(v, s.Now), Written: true, Recovered: true, Verdict: v}, Follow{}, time.Time{}
	}
	if !rec.InFlight() {
		return nil, Follow{}, time.Time{}
	}
	rule := r.Kinds[s.Key.Resource].Rollout
	deadline := rec.At.Add(rule.DeadlineOrDefault())
	var follow Follow
	unwritten := rec.EndUnwritten()
	if unwritten {
		followed := s.Rollout.Followed && s.Rollout.FollowedAt.Equal(rec.At)
		switch {
		case followed && s.Rollout.Ended:
			return nil, Follow{}, time.Time{}
		case !followed && (!s.Now.Before(deadline) || status.Phase == rollout.Complete || status.Phase == rollout.NotRolling):
			// Not this process's to judge: it ended, or its deadline
			// passed, before this process knew it.
			return nil, Follow{}, time.Time{}
		case !followed:
			follow = Follow{Start: true, At: rec.At, Deadline: deadline}
		}
	}
	verdict := rule.Judge(status, rec.At, s.Now)
	if verdict.Result == rollout.ResultPending {
		// The deadline: judge again then, if no status change comes first.
		return nil, follow, earliest(poll, s.Now.Add(verdict.Wait+10*time.Millisecond))
	}
	if unwritten && verdict.Result != rollout.ResultFailed {
		// Its status says so to every later decision. Remembered as ended
		// until its deadline, so that it is not adopted again meanwhile.
		follow.End = true
		return &Ended{Record: rec, Verdict: verdict}, follow, time.Time{}
	}
	return &Ended{Record: rec.WithResult(verdict, s.Now), Written: true, Verdict: verdict}, Follow{Forget: true}, time.Time{}
}
