package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

type phaseResult struct {
	name       string
	n          int // N of a simultaneous-change phase; 0 for one change at a time
	changes    int
	grace      time.Duration
	latencies  []time.Duration // update issued → carrying restart seen
	sinceDone  []time.Duration // update returned → carrying restart seen
	returned   []time.Duration // update call duration
	missing    int             // changes no restart carried in time
	updateErrs int
	deps       int // workloads the changes target
	restarts   int // restarts of those
	once       int // of those restarted exactly once
	maxPerDep  int
	stray      int // restarts of workloads no change targets
	patches    float64
	ctrlWrites float64
	conflicts  float64
	wall       time.Duration // first update issued → last carrying restart seen
	cpu        float64       // the program's CPU seconds from the first update to quiet
	patchMean  time.Duration // mean duration of the controller's PATCH calls (0 for other programs)
	issueSpan  time.Duration // first update issued → last update issued
	api        *apiLoad      // the control plane, first update to quiet (apiload.go)
	ctrl       ctrlMeans     // the controller's queue wait, PATCH and change-to-restart means
}

// phaseRun is a phase under way: its changes, prepared before the first is
// issued so that generating data does not delay the updates, and what became
// of each.
type phaseRun struct {
	e        *env
	changes  []sourceRef
	before   []string // each source's applied checksum before its change ("" for a program that records none)
	apply    []func(context.Context, kubernetes.Interface) error
	targets  map[string]bool // workloads the changes target
	issued   []time.Time
	returned []time.Time
	errs     []error
}

// runPhase issues the changes (all at once from o.updaters goroutines, or one
// after the other, each waiting for its restart) and measures them, whatever
// program runs: latency is update issued → the restart that carries it, as
// the benchmark's own watch sees it.
func (e *env) runPhase(ctx context.Context, name string, changes []sourceRef, concurrent bool, grace time.Duration, onQuiet func()) (*phaseResult, error) {
	if concurrent {
		// Every fan-out starts on a control plane done with the phase
		// before (new ReplicaSets, statuses), whichever program runs.
		e.waitAPIQuiet(ctx)
	}
	if onQuiet != nil {
		// Profiles start here, not before the wait for quiet: they
		// would cover seconds of nothing and miss the changes.
		onQuiet()
	}
	logf("--- %s (%d changes)", name, len(changes))
	run, err := e.preparePhase(changes)
	if err != nil {
		return nil, err
	}
	r := &phaseResult{name: name, changes: len(changes), grace: grace, deps: len(run.targets)}
	before, err := e.counters(ctx)
	if err != nil {
		return nil, err
	}
	apiBefore, err := e.apiSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	ctrlBefore, err := e.ctrlSnapshot()
	if err != nil {
		return nil, err
	}
	cpuBefore, _ := e.proc.cpuSeconds()
	start := time.Now()
	if concurrent {
		run.issueAtOnce(ctx, e.o.updaters)
	} else {
		run.issueOneByOne(ctx, grace)
	}
	r.issueSpan = run.lastIssued().Sub(start)
	run.collectLatencies(r, start, !concurrent)
	e.settle(ctx)
	end := time.Now()
	cpuAfter, _ := e.proc.cpuSeconds()
	r.cpu = cpuAfter - cpuBefore
	after, err := e.counters(ctx)
	if err != nil {
		return nil, err
	}
	r.addWrites(before, after)
	apiAfter, err := e.apiSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	r.api = apiAfter.since(apiBefore)
	ctrlAfter, err := e.ctrlSnapshot()
	if err != nil {
		return nil, err
	}
	r.ctrl = ctrlAfter.since(ctrlBefore)
	r.countRestarts(e.rec.restartsBetween(start, end), run.targets)
	r.logSummary()
	return r, nil
}

func (e *env) preparePhase(changes []sourceRef) (*phaseRun, error) {
	n := len(changes)
	run := &phaseRun{
		e: e, changes: changes,
		before: make([]string, n), apply: make([]func(context.Context, kubernetes.Interface) error, n), targets: map[string]bool{},
		issued: make([]time.Time, n), returned: make([]time.Time, n), errs: make([]error, n),
	}
	rng := newRand()
	for i, c := range changes {
		if e.recording {
			run.before[i] = e.rec.applied(c.wl)[c.id()]
			if run.before[i] == "" {
				return nil, fmt.Errorf("%s has no applied checksum for %s", c.wl.key(), c.id())
			}
		}
		run.apply[i] = e.objs.newChange(rng, c)
		run.targets[c.wl.key()] = true
	}
	return run, nil
}

// issueAtOnce sends every change from up to updaters goroutines, then waits
// for the restarts that carry them.
func (run *phaseRun) issueAtOnce(ctx context.Context, updaters int) {
	work := make(chan int, len(run.changes))
	for i := range run.changes {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range min(updaters, len(run.changes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				run.update(ctx, i)
			}
		}()
	}
	wg.Wait()
	all := make([]int, len(run.changes))
	for i := range all {
		all[i] = i
	}
	run.waitCarried(ctx, all, 3*time.Minute)
}

// issueOneByOne sends each change once the one before has its restart, so
// that each latency is that of a change alone.
func (run *phaseRun) issueOneByOne(ctx context.Context, grace time.Duration) {
	for i := range run.changes {
		run.update(ctx, i)
		run.waitCarried(ctx, []int{i}, 30*time.Second+grace)
		time.Sleep(200 * time.Millisecond) // let the Deployment controller's own write pass
	}
}

func (run *phaseRun) update(ctx context.Context, i int) {
	run.issued[i] = time.Now()
	run.errs[i] = run.apply[i](ctx, run.e.cs)
	run.returned[i] = time.Now()
}

// carried returns when the restart that carries change i was seen.
func (run *phaseRun) carried(i int) (time.Time, bool) {
	c := run.changes[i]
	return run.e.rec.carried(c.wl.key(), c.id(), run.before[i], run.issued[i])
}

// waitCarried waits until every change in idx that was applied has its
// restart, or the timeout passes.
func (run *phaseRun) waitCarried(ctx context.Context, idx []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		pending := 0
		for _, i := range idx {
			if run.errs[i] != nil {
				continue
			}
			if _, ok := run.carried(i); !ok {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (run *phaseRun) lastIssued() time.Time {
	var last time.Time
	for _, t := range run.issued {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// collectLatencies adds each change's fate to r; logEach logs each latency
// too, for the phases of few changes.
func (run *phaseRun) collectLatencies(r *phaseResult, start time.Time, logEach bool) {
	var lastSeen time.Time
	for i, c := range run.changes {
		if run.errs[i] != nil {
			r.updateErrs++
			logf("  update %s: %v", c.id(), run.errs[i])
			continue
		}
		r.returned = append(r.returned, run.returned[i].Sub(run.issued[i]))
		seen, ok := run.carried(i)
		if !ok {
			r.missing++
			continue
		}
		r.latencies = append(r.latencies, seen.Sub(run.issued[i]))
		r.sinceDone = append(r.sinceDone, seen.Sub(run.returned[i]))
		if seen.After(lastSeen) {
			lastSeen = seen
		}
		if logEach {
			logf("  %-28s %s (%s): %s", c.id(), c.wl.key(), c.form, seen.Sub(run.issued[i]).Round(time.Millisecond))
		}
	}
	if !lastSeen.IsZero() {
		r.wall = lastSeen.Sub(start)
	}
}

func (r *phaseResult) addWrites(before, after counters) {
	r.patches = after.patches - before.patches
	r.ctrlWrites = after.writes - before.writes
	r.conflicts = after.conflicts - before.conflicts
	if n := after.patchCount - before.patchCount; n > 0 {
		r.patchMean = time.Duration((after.patchSum - before.patchSum) / n * float64(time.Second))
	}
}

// countRestarts splits the phase's restarts into those of the Deployments
// the changes target and stray ones.
func (r *phaseResult) countRestarts(perDep map[string]int, targets map[string]bool) {
	for dep, n := range perDep {
		if !targets[dep] {
			r.stray += n
			continue
		}
		r.restarts += n
		r.maxPerDep = max(r.maxPerDep, n)
		if n == 1 {
			r.once++
		}
	}
}

func (r *phaseResult) logSummary() {
	st := stats(r.latencies)
	logf("  latency p50 %s p90 %s p99 %s max %s; restarts %d for %d changes on %d workloads (%d exactly once, %d stray, %d missing); %.0f PATCHes, %.0f conflicts; CPU %.2f s",
		sec(st.p50), sec(st.p90), sec(st.p99), sec(st.max), r.restarts, r.changes, r.deps, r.once, r.stray, r.missing, r.patches, r.conflicts, r.cpu)
	if r.api != nil {
		logf("  API server writes: %s; etcd write mean %.1f ms over %.0f; CPU: %s", r.api.writes(12), 1000*r.api.etcdMean, r.api.etcdN, r.api.cpuLine())
	}
	if r.ctrl != (ctrlMeans{}) {
		logf("  program: queue wait mean %.0f ms, PATCH mean %.0f ms (client side), change to restart mean %.0f ms", 1000*r.ctrl.queue, 1000*r.ctrl.patch, 1000*r.ctrl.changeToRestart)
	}
}

type pct struct {
	n                  int
	p50, p90, p99, max time.Duration
}

// stats returns nearest-rank percentiles.
func stats(d []time.Duration) pct {
	if len(d) == 0 {
		return pct{p50: noData, p90: noData, p99: noData, max: noData}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return pct{n: len(s), p50: rank(0.50), p90: rank(0.90), p99: rank(0.99), max: s[len(s)-1]}
}
