package restart

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/notify"
)

// Notifier takes notifications for sinks. Notify must never block: a slow
// sink must not delay a restart (notify.Notifier queues, or drops).
type Notifier interface{ Notify(notify.Message) }

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
	changed, known := c.windows.ChangedKeys(id)
	return notify.Changed(id.String(), read, changed, known)
}
