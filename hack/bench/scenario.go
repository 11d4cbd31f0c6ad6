package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/restart-controller/restart-controller/hack/bench/trend"
)

// The programs a scenario can run, each measured the same way from outside
// (program.go): the controller, and two references built into this binary
// (floor.go, zerologic.go).
const (
	progController = trend.Controller
	progFloor      = trend.Floor
	progPatcher    = trend.Patcher
)

// scenario is one row of the table the harness runs: what to create, which
// phases to send, which programs to run over them, and the targets its
// report checks. A scenario with run set is not a harness scenario: it has
// a procedure of its own (the fleet step).
type scenario struct {
	name    string
	about   string
	objects func(o options, scale int) objectSet
	scales  []int // size multipliers, one fresh cluster each
	changes []int // N of each simultaneous-change phase, grace 0
	// programs run in this order on the same cluster and objects. The
	// references come first: they write nothing the controller reads (the
	// patcher's restarts carry no checksums, and a workload's first sight
	// is recorded without a restart), while a controller's checksums would
	// remain for whatever ran after it. The controller always runs.
	programs []string
	creators int // concurrent object creations
	// apiserverArgs come before --apiserver-args.
	apiserverArgs []string
	// graceStart and large are the controller-only steps of the default
	// scenario: a second start with --grace, and the large sources.
	graceStart, large bool
	targets           targets

	run func(ctx context.Context, o options) string
}

// targets are the limits a scenario's report checks; 0 leaves one out.
type targets struct {
	peakRSSKB     int64   // controller's peak RSS, whole run
	rssGrowth     float64 // peak RSS at the larger scales against the first
	ready         bool    // ready within targetReady
	singleChange  bool    // one change within grace + targetSingleExtra
	p99           map[int]float64
	patcherP99    float64 // controller's fan-out p99 ≤ this × the patcher's
	floorPeakRSS  float64 // controller's peak RSS ≤ this × the floor's
	floorCPUReady float64 // controller's CPU seconds to ready ≤ this × the floor's
}

// scenarios is the table: every scenario `--scenarios` can name.
func scenarios(o options) []*scenario {
	return []*scenario{
		{
			name:    "default",
			about:   "the issue's scenario: few workloads reading large sources, the sources' size multiplied by each scale",
			objects: newDefaultSet, scales: o.scales, changes: o.changes,
			programs: []string{progFloor, progPatcher, progController}, creators: o.creators,
			graceStart: true, large: o.largeSources > 0,
			targets: targets{peakRSSKB: targetRSSKB, rssGrowth: targetRSSGrowth, ready: true, singleChange: true,
				p99: map[int]float64{smallN: targetP99Small.Seconds(), largeN: targetP99Large.Seconds()}, patcherP99: targetPatcherRatio},
		},
		{
			name:  "10k",
			about: "many workloads over many small sources (BENCHMARKS.md, \"10,000 workloads\")",
			objects: func(o options, _ int) objectSet {
				return scaleSpec{workloads: o.scaleWorkloads, sources: o.scaleSources}
			},
			scales: []int{1}, changes: []int{o.scaleChanges},
			programs: []string{progFloor, progPatcher, progController}, creators: o.scaleCreators,
			// The API server must take the creators and the controller's
			// patches together (priority and fairness is off in testcluster,
			// so these two limits are what applies).
			apiserverArgs: []string{"--max-requests-inflight=800", "--max-mutating-requests-inflight=400"},
			targets: targets{singleChange: true, patcherP99: target10kPatcherRatio,
				floorPeakRSS: targetFloorRSSRatio, floorCPUReady: targetFloorCPURatio},
		},
		{name: "fleet", about: "paced against unpaced restarts of one ConfigMap's readers (fleet.go)", run: fleetReport},
		{name: "status", about: "the operator CLI's status -A over the 10k scenario's objects, the controller down (statusbench.go)", run: statusReport},
	}
}

// validate checks a scenario before anything starts.
func (s *scenario) validate(o options) error {
	if s.name == "" {
		return fmt.Errorf("a scenario without a name")
	}
	if s.run != nil {
		return nil
	}
	if s.objects == nil || len(s.scales) == 0 || len(s.changes) == 0 {
		return fmt.Errorf("scenario %s: needs objects, scales and changes", s.name)
	}
	if !slices.Contains(s.programs, progController) {
		return fmt.Errorf("scenario %s: programs %v lack the controller", s.name, s.programs)
	}
	for _, p := range s.programs {
		if p != progController && p != progFloor && p != progPatcher {
			return fmt.Errorf("scenario %s: unknown program %q", s.name, p)
		}
	}
	if s.targets.patcherP99 > 0 && !slices.Contains(s.programs, progPatcher) ||
		(s.targets.floorPeakRSS > 0 || s.targets.floorCPUReady > 0) && !slices.Contains(s.programs, progFloor) {
		return fmt.Errorf("scenario %s: a target compares with a program it does not run", s.name)
	}
	for _, sc := range s.scales {
		if sc < 1 {
			return fmt.Errorf("scenario %s: scale %d is not positive", s.name, sc)
		}
		objs := s.objects(o, sc)
		for _, n := range s.changes {
			if n < 1 || n > objs.maxFanOut() {
				return fmt.Errorf("scenario %s: %d changes is not in 1..%d", s.name, n, objs.maxFanOut())
			}
		}
		// Each single-change round takes workloads of its own.
		if rounds := 2; o.singles*rounds > objs.workloadCount() {
			return fmt.Errorf("scenario %s: --singles %d needs %d workloads, it has %d", s.name, o.singles, o.singles*rounds, objs.workloadCount())
		}
	}
	return nil
}

// selectScenarios returns the named scenarios of the table, in the order
// named, each validated.
func selectScenarios(o options, names []string) ([]*scenario, error) {
	table := scenarios(o)
	var out []*scenario
	for _, n := range names {
		i := slices.IndexFunc(table, func(s *scenario) bool { return s.name == n })
		if i < 0 {
			var known []string
			for _, s := range table {
				known = append(known, s.name)
			}
			return nil, fmt.Errorf("--scenarios: unknown scenario %q (known: %v)", n, known)
		}
		if err := table[i].validate(o); err != nil {
			return nil, err
		}
		out = append(out, table[i])
	}
	return out, nil
}
