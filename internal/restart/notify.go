package restart

import (
	"fmt"
	"slices"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/notify"
	"github.com/restart-controller/restart-controller/internal/pacing"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// Notifier takes notifications for chat and webhook sinks. Notify must
// never block: it is called on the reconcile path, and a slow sink must
// not delay a restart (notify.Notifier queues, or drops when full).
type Notifier interface {
	Notify(notify.Message)
}

// NotifyWith sends notifications of restarts, holds and rollout outcomes
// to n, before Run. Without it none are sent; a dry run sends none.
func (c *Controller) NotifyWith(n Notifier) { c.notifier = n }

// tell hands a notification about the workload to the notifier, if any.
func (c *Controller) tell(kind notify.Kind, key catalog.WorkloadKey, sources []notify.Source, outcome, reason string, at time.Time) {
	if c.notifier == nil || c.cfg.Settings.DryRun {
		return
	}
	c.notifier.Notify(notify.Message{
		Kind:     kind,
		Workload: notify.Workload{Group: key.Resource.Group, Resource: key.Resource.Resource, Namespace: key.Namespace, Name: key.Name},
		Sources:  sources, Outcome: outcome, Reason: reason, Time: at.UTC(),
	})
}

// changedRead says, for a source whose change causes a restart, which of
// the keys the workload reads changed, when the grace window of the change
// knows them; else the keys the workload reads from it (nil: every key).
// The Restarted Event and the restart notification both say this.
func (c *Controller) changedRead(id catalog.SourceID, refs []catalog.Reference) notify.Source {
	var read []string // nil: every key
	for _, r := range refs {
		if r.ID == id {
			read = r.Keys
		}
	}
	if changed, known := c.windows.ChangedKeys(id); known {
		if read != nil {
			changed = slices.DeleteFunc(changed, func(k string) bool { return !slices.Contains(read, k) })
		}
		if len(changed) > 0 {
			return notify.Source{ID: id.String(), Keys: changed, KeysAre: notify.KeysChanged}
		}
	}
	if read != nil {
		return notify.Source{ID: id.String(), Keys: read, KeysAre: notify.KeysRead}
	}
	return notify.Source{ID: id.String(), KeysAre: notify.KeysAll}
}

// holdReason says why a restart is held and what ends the hold.
func (c *Controller) holdReason(hold *pacing.Hold) (string, []notify.Source) {
	if hold.Kind != pacing.HoldWave {
		return fmt.Sprintf("%s; it restarts once the sources it reads have been still for %s", hold.Cause, c.cfg.Breaker.Quiet), nil
	}
	reason := fmt.Sprintf("the change %s of %s is halted, a rollout of it failed: %s; it goes on when that rollout completes, "+
		"when %s changes again, or when the change is released", hold.Change, hold.Source, hold.Cause, hold.Source)
	return reason, []notify.Source{{ID: hold.Source}}
}

// deliveredSources are the sources a restart delivered, for the
// notifications of its rollout.
func deliveredSources(rec *pacing.LastRestart) []notify.Source {
	ids := make([]string, 0, len(rec.Sources))
	for id := range rec.Sources {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]notify.Source, len(ids))
	for i, id := range ids {
		out[i] = notify.Source{ID: id}
	}
	return out
}

// rolloutReason is a rollout verdict's reason and message, as its Event says them.
func rolloutReason(v rollout.Verdict) string {
	if v.Message == "" {
		return v.Reason
	}
	return v.Reason + ": " + v.Message
}
