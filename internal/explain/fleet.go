package explain

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// FleetLister lists the workloads of the explained workload's namespace, of
// every configured kind, with the caller's credentials; nil when explain is
// not to list them (then waves see the explained workload alone).
type FleetLister func() []Workload

// explainFleet is the fleet as explain can see it from the cluster
// (decision.FleetView): the readers of a source from a listing, their
// records and holds from their annotations. When sources last changed lives
// in the controller's memory only.
type explainFleet struct {
	c       *Config
	now     time.Time
	self    catalog.WorkloadKey
	state   *catalog.WorkloadState
	sources decision.SourceLookup
	fetch   func(id catalog.SourceID) (*catalog.SourceState, bool)
	list    FleetLister
	// readers are the opted-in workloads listed, reduced; nil until the
	// first decision that needs them.
	readers []decision.Reader
	listed  bool
}

func (f *explainFleet) Now() time.Time { return f.now }

func (f *explainFleet) LastChange([]catalog.Reference) (time.Time, bool) { return time.Time{}, false }

func (f *explainFleet) Wave(id catalog.SourceID, src *catalog.SourceState) pacing.State {
	var of []decision.Reader
	for _, rd := range f.all() {
		for _, ref := range rd.State.References {
			if ref.ID == id {
				of = append(of, rd)
				break
			}
		}
	}
	return f.c.rules().WaveState(of, id, src)
}

func (f *explainFleet) InFlight() int {
	n := 0
	for _, rd := range f.all() {
		if rd.LastRestart.InFlight() && rd.LastRestart.CountedInFlight() {
			n++
		}
	}
	return n
}

func (f *explainFleet) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	if s, ok := f.sources.Source(id); ok {
		return s, true
	}
	return f.fetch(id)
}

// all lists the readers once: the explained workload as the one deciding,
// and every other workload listed.
func (f *explainFleet) all() []decision.Reader {
	if f.listed {
		return f.readers
	}
	f.listed = true
	rec, _ := pacing.ParseLastRestart(f.state.LastRestart)
	f.readers = []decision.Reader{{Key: f.self, State: f.state, LastRestart: rec, Self: true}}
	if f.list == nil {
		return f.readers
	}
	for _, wl := range f.list() {
		key := catalog.WorkloadKey{Resource: wl.Kind.GVR, Namespace: wl.Object.GetNamespace(), Name: wl.Object.GetName()}
		if key == f.self {
			continue
		}
		reduced, err := catalog.ReduceWorkload(wl.Kind, f.c.Config)(wl.Object)
		if err != nil {
			continue
		}
		w, ok := reduced.(*catalog.WorkloadState)
		if !ok {
			continue
		}
		rec, _ := pacing.ParseLastRestart(w.LastRestart)
		f.readers = append(f.readers, decision.Reader{Key: key, State: w, LastRestart: rec})
	}
	return f.readers
}

// rules are the controller's decision rules, with the checksums explain can
// compute.
func (c *Config) rules() decision.Rules { return decision.RulesOf(c.Config, c.Sums) }
