package restart

import (
	"sync"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
)

// followed are the rollouts whose completion goes unwritten
// (record.LastRestart.EndUnwritten) that this process follows: those it
// restarted, and those it found still rolling inside their deadline (a
// rollout started by the process before it). Only a followed rollout is
// judged (decision.Rollout.Followed). An ended rollout is kept until its
// deadline, so that it is not adopted again meanwhile; one past its
// deadline is never adopted. Nothing else reads it: wave decisions and the
// cap read the record and the workload's status.
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

// state returns the followed rollout of the workload: the time of its
// restart, whether its end was seen, and whether one is followed at all.
func (f *followed) state(key catalog.WorkloadKey) (at time.Time, ended, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.byKey[key]
	return e.at, e.ended, ok
}

// note changes what is followed of the workload as a verdict says: follow
// the rollout of the restart at do.At until do.Deadline (do.End: its end
// was seen already), note that its end was seen, or forget it (its end was
// written, or the workload is gone or opted out).
func (f *followed) note(key catalog.WorkloadKey, do decision.Follow) {
	if do == (decision.Follow{}) {
		return // most verdicts: the lock is not taken
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case do.Forget:
		delete(f.byKey, key)
	case do.Start:
		if f.byKey == nil {
			f.byKey = map[catalog.WorkloadKey]followedRollout{}
		}
		f.byKey[key] = followedRollout{at: do.At, deadline: do.Deadline, ended: do.End}
	case do.End:
		if e, ok := f.byKey[key]; ok {
			e.ended = true
			f.byKey[key] = e
		}
	}
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
