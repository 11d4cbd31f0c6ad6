package explain

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"k8s.io/apimachinery/pkg/labels"
)

// FleetLister lists the workloads of the explained workload's namespace, of
// every configured kind, with the caller's credentials; nil when explain is
// not to list them (then waves see the explained workload alone).
type FleetLister func() []Workload

// pacingFacts are the pacing facts of a due restart as explain can see
// them from the cluster (decision.Pacing): the readers of each change from
// a listing, their records and holds from their annotations. When sources
// last changed lives in the controller's memory only: unknown.
func (c *Config) pacingFacts(self catalog.WorkloadKey, w decision.Workload, deliver []catalog.SourceID, sources decision.Sources,
	list FleetLister, now time.Time) decision.Pacing {
	readers := c.listReaders(self, w, list)
	p := decision.Pacing{Now: now, Waves: map[catalog.SourceID]decision.WaveState{}}
	for _, rd := range readers {
		if rd.LastRestart.CountedInFlight() {
			p.InFlight++
		}
	}
	rules := c.rules()
	for _, id := range deliver {
		src, ok := sources[id]
		if !ok {
			continue
		}
		of := map[catalog.WorkloadKey]decision.Workload{}
		for key, rd := range readers {
			for _, ref := range rd.State.References {
				if ref.ID == id {
					of[key] = rd
					break
				}
			}
		}
		p.Waves[id] = rules.WaveOf(of, self, id, src, c.namespaceLabels, now)
	}
	return p
}

// listReaders lists the workloads that may read the sources: the explained
// one, and every other workload listed, reduced as the controller's cache
// reduces them.
func (c *Config) listReaders(self catalog.WorkloadKey, w decision.Workload, list FleetLister) map[catalog.WorkloadKey]decision.Workload {
	readers := map[catalog.WorkloadKey]decision.Workload{self: w}
	if list == nil {
		return readers
	}
	for _, wl := range list() {
		key := catalog.WorkloadKey{Resource: wl.Kind.GVR, Namespace: wl.Object.GetNamespace(), Name: wl.Object.GetName()}
		if key == self {
			continue
		}
		reduced, err := catalog.ReduceWorkload(wl.Kind, c.Config)(wl.Object)
		if err != nil {
			continue // unreadable as the controller's cache would find it: it takes no part
		}
		if state, ok := reduced.(*catalog.WorkloadState); ok {
			readers[key] = decision.ReadWorkload(state)
		}
	}
	return readers
}

// rules are the controller's decision rules, with the checksums explain can
// compute.
func (c *Config) rules() decision.Rules { return decision.NewRules(c.Config, c.Sums) }

// namespaceLabels reads a namespace's labels, for the restart window of its
// workloads, when restart windows select namespaces and the caller may
// read them; nil otherwise.
func (c *Config) namespaceLabels(namespace string) labels.Labels {
	if !c.WindowsSelectNamespaces() || c.NamespaceLabels == nil {
		return nil
	}
	set, err := c.NamespaceLabels(namespace)
	if err != nil {
		return nil
	}
	return labels.Set(set)
}
