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
	// pairs is how many times the controller and the patcher are compared
	// at each scale, each time on a fresh cluster of their own: the scale's
	// full run is the first, then pairs of the two alone, in alternate
	// orders (controller first, then patcher first, ...). A fan-out ratio
	// from one pair moves by up to 1.6x between runs on a loaded 2-core
	// machine; the median of several, with their spread, does not mislead.
	pairs    int
	creators int // concurrent object creations
	// apiserverArgs come before --apiserver-args.
	apiserverArgs []string
	// graceStart and large are the controller-only steps of the default
	// scenario: a second start with --grace, and the large sources;
	// restart and failover those of the large scenarios: a second start
	// (grace 0) on workloads that carry their checksums, and two replicas
	// with leader election, the leader stopped (restart.go).
	graceStart, large, restart, failover bool
	targets                              targets

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
			programs: []string{progFloor, progPatcher, progController}, pairs: o.pairs, creators: o.creators,
			graceStart: true, large: o.largeSources > 0,
			targets: targets{peakRSSKB: targetRSSKB, rssGrowth: targetRSSGrowth, ready: true, singleChange: true,
				p99: map[int]float64{smallN: targetP99Small.Seconds(), largeN: targetP99Large.Seconds()}, patcherP99: targetPatcherRatio},
		},
		scaleScenario("2.5k", "2,500 workloads: the smallest point of the per-workload slopes", o,
			scaleSpec{workloads: 2500, sources: 7500}, 250, o.scaleCreators, o.scaleRounds, false),
		scaleScenario("10k", "many workloads over many small sources (BENCHMARKS.md, \"10,000 workloads\")", o,
			scaleSpec{workloads: o.scaleWorkloads, sources: o.scaleSources}, o.scaleChanges, o.scaleCreators, o.scaleRounds, false),
		scaleScenario("50k", "50,000 workloads over more than 150,000 sources, with a controller restart and a failover to a warm standby (opt-in)", o,
			scaleSpec{workloads: o.xlWorkloads, sources: o.xlSources}, o.xlChanges, o.xlCreators, 1, true),
		{name: "keybomb", about: "large sources on an otherwise empty cluster (keybomb.go)", run: keyBombReport},
		{name: "fleet", about: "paced against unpaced restarts of one ConfigMap's readers (fleet.go)", run: fleetReport},
		{name: "status", about: "the operator CLI's status -A over the 10k scenario's objects, the controller down (statusbench.go)", run: statusReport},
	}
}

// scaleScenario is a scenario of many workloads over many small sources
// (scaleobjects.go), measured beside the floor and the patcher; large adds
// the controller's restart and failover.
func scaleScenario(name, about string, o options, spec scaleSpec, changes, creators, rounds int, large bool) *scenario {
	return &scenario{
		name: name, about: about,
		objects: func(options, int) objectSet { return spec },
		scales:  []int{1}, changes: []int{changes},
		programs: scalePrograms(rounds), creators: creators,
		// The API server must take the creators and the controller's
		// patches together (priority and fairness is off in testcluster,
		// so these two limits are what applies).
		apiserverArgs: []string{"--max-requests-inflight=800", "--max-mutating-requests-inflight=400"},
		restart:       large, failover: large,
		targets: targets{singleChange: true, patcherP99: target10kPatcherRatio,
			floorPeakRSS: targetFloorRSSRatio, floorCPUReady: targetFloorCPURatio},
	}
}

// scalePrograms is the order programs run in on a scale scenario's
// cluster: the floor, then the controller rounds times, each between two
// patcher runs. One cluster at this size takes minutes to fill, so the
// comparisons share it; alternating spreads its drift (more ReplicaSets,
// a larger etcd) over both programs. One fan-out of one run against one
// patcher run ranged from 0.85× to 1.91× on one commit at 10,000
// workloads (BENCHMARKS.md): the median of several is the figure. A
// later controller run restarts at its start the readers of what the
// patcher changed in between (the patcher writes no records).
func scalePrograms(rounds int) []string {
	programs := []string{progFloor, progPatcher}
	for range rounds {
		programs = append(programs, progController, progPatcher)
	}
	return programs
}

// singleRounds is how many rounds of single changes a scenario sends, each
// on workloads of its own: the programs', then one per second start.
func (s *scenario) singleRounds() int {
	n := 1
	for _, step := range []bool{s.graceStart, s.restart, s.failover} {
		if step {
			n++
		}
	}
	return max(n, 2)
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
	switch n := count(s.programs, progController); {
	case n == 0:
		return fmt.Errorf("scenario %s: programs %v lack the controller", s.name, s.programs)
	case n > 1 && (s.graceStart || s.restart || s.failover || s.large):
		// Those steps follow the controller's first run; a second run
		// would meet a cluster they changed.
		return fmt.Errorf("scenario %s: programs %v run the controller %d times, and the steps after its run need it once", s.name, s.programs, n)
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
	if s.pairs > 1 && !slices.Contains(s.programs, progPatcher) {
		return fmt.Errorf("scenario %s: %d pairs, but no patcher to pair the controller with", s.name, s.pairs)
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
		if rounds := s.singleRounds(); o.singles*rounds > objs.workloadCount() {
			return fmt.Errorf("scenario %s: --singles %d needs %d workloads, it has %d", s.name, o.singles, o.singles*rounds, objs.workloadCount())
		}
	}
	return nil
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
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
