package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// The large scenarios' controller-only steps, after its phases: what an
// operator meets at that size when the process is replaced. A restart is a
// second process started on workloads that carry their checksums (a
// rollout of the controller, a crash); a failover is two replicas with
// leader election, the leader stopped (SIGTERM: it drains, then releases
// the lease) and the warm standby taking over. In both, the single changes
// are issued as soon as the new process may act, not once it is quiet: a
// change that waits behind the start-up decisions of every workload is what
// these steps are there to show.

// restartFigures are a second controller start's, grace 0.
type restartFigures struct {
	ready, readyz time.Duration
	cpuReady      float64
	hwmReady      int64   // kB
	writes        float64 // PATCHes other than the single changes' restarts, start to quiet
	quiet         time.Duration
	singles       *phaseResult
	proc          procFigures
}

// measureRestart starts a second controller (grace 0) and sends it the
// second round of single changes at once.
func (e *env) measureRestart(ctx context.Context) (*restartFigures, error) {
	f := &restartFigures{}
	patchesBefore, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.startController("controller-restart.log", 0); err != nil {
		return nil, err
	}
	started := e.proc.started
	if f.ready, f.readyz, err = e.proc.waitReady(ctx, 10*time.Minute); err != nil {
		return nil, err
	}
	f.cpuReady, _ = e.proc.cpuSeconds()
	f.hwmReady, _, _ = e.proc.memory()
	logf("restarted controller ready in %s (CPU %.2f s, peak RSS so far %s)", sec(f.ready), f.cpuReady, kbString(f.hwmReady))
	if f.singles, err = e.runPhase(ctx, "restarted controller: one change, grace 0, from ready", e.objs.singles(1, e.o.singles), false, 0, nil); err != nil {
		return nil, err
	}
	e.settle(ctx)
	f.quiet = time.Since(started)
	patchesAfter, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	f.writes = patchesAfter - patchesBefore - float64(f.singles.restarts)
	f.proc = e.finishProgram()
	logf("restarted controller: quiet %s after start, %.0f PATCHes besides the single changes', peak RSS %s, CPU %.2f s",
		sec(f.quiet), f.writes, kbString(f.proc.hwm), f.proc.cpu)
	return f, nil
}

// failoverFigures are two replicas', the leader stopped.
type failoverFigures struct {
	leaderQuiet    time.Duration // the first leader: start → elected and quiet
	standbyHWM     int64         // kB, the standby's peak RSS before it leads
	standbyCPU     float64       // its CPU seconds then
	takeover       time.Duration // SIGTERM to the leader → the standby leads
	writes         float64       // PATCHes besides the single changes', takeover to quiet
	takeoverCPU    float64       // the new leader's CPU seconds, takeover to quiet
	quiet          time.Duration // takeover → quiet
	singles        *phaseResult
	proc           procFigures // the new leader's, at the end
	leaderStopErrs string
}

// measureFailover runs two replicas with leader election, stops the leader
// once it is quiet, and sends the third round of single changes to the
// standby as soon as it leads.
func (e *env) measureFailover(ctx context.Context) (*failoverFigures, error) {
	f := &failoverFigures{}
	var procs [2]*controllerProc
	for i, id := range []string{"bench-a", "bench-b"} {
		p, err := startController(e.o, e.kubeconfig, filepath.Join(e.dir, "controller-failover-"+id+".log"), 0,
			"--leader-elect", "--leader-election-identity", id)
		if err != nil {
			return nil, err
		}
		procs[i] = p
		defer func() { _ = p.stop() }() // a no-op once stopped
	}
	began := time.Now()
	for _, p := range procs {
		if _, _, err := p.waitReady(ctx, 10*time.Minute); err != nil {
			return nil, err
		}
	}
	leader, standby, err := waitLeader(ctx, procs, time.Minute)
	if err != nil {
		return nil, err
	}
	e.proc, e.recording = leader, true
	e.settle(ctx)
	f.leaderQuiet = time.Since(began)
	f.standbyHWM, _, _ = standby.memory()
	f.standbyCPU, _ = standby.cpuSeconds()
	logf("failover: leader %s quiet %s after start; standby peak RSS %s, CPU %.2f s", leader.cmd.Args[len(leader.cmd.Args)-1],
		sec(f.leaderQuiet), kbString(f.standbyHWM), f.standbyCPU)

	patchesBefore, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	stopped := time.Now()
	stopErr := make(chan error, 1)
	go func() { stopErr <- leader.stop() }()
	if err := waitGauge(ctx, standby, "restart_controller_leader", 2*time.Minute); err != nil {
		return nil, fmt.Errorf("the standby did not take over: %w", err)
	}
	f.takeover = time.Since(stopped)
	took := time.Now()
	cpuAtTakeover, _ := standby.cpuSeconds()
	e.proc = standby
	logf("failover: the standby leads %s after the leader's SIGTERM", sec(f.takeover))
	if f.singles, err = e.runPhase(ctx, "after failover: one change, grace 0, from takeover", e.objs.singles(2, e.o.singles), false, 0, nil); err != nil {
		return nil, err
	}
	e.settle(ctx)
	f.quiet = time.Since(took)
	cpu, _ := standby.cpuSeconds()
	f.takeoverCPU = cpu - cpuAtTakeover
	patchesAfter, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	f.writes = patchesAfter - patchesBefore - float64(f.singles.restarts)
	if err := <-stopErr; err != nil {
		f.leaderStopErrs = err.Error()
		logf("warning: the first leader: %v", err)
	}
	f.proc = e.finishProgram()
	logf("failover: quiet %s after takeover, %.0f PATCHes besides the single changes', CPU %.2f s", sec(f.quiet), f.writes, f.takeoverCPU)
	return f, nil
}

// waitLeader waits until one of the replicas reports that it leads.
func waitLeader(ctx context.Context, procs [2]*controllerProc, timeout time.Duration) (leader, standby *controllerProc, err error) {
	deadline := time.Now().Add(timeout)
	for {
		for i, p := range procs {
			if m, err := p.metrics(); err == nil {
				if sumOf(m, "restart_controller_leader") == 1 {
					return p, procs[1-i], nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("no replica leads after %s:\n%s", timeout, procs[0].logTail(10))
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitGauge polls a gauge of p every 20 ms until it is 1.
func waitGauge(ctx context.Context, p *controllerProc, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if m, err := p.metrics(); err == nil {
			if sumOf(m, name) == 1 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not 1 after %s:\n%s", name, timeout, p.logTail(10))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("exited:\n%s", p.logTail(20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// restartRows are the large scenarios' restart and failover figures.
func restartRows(c column, r *scaleRun) {
	if f := r.restart; f != nil {
		c.set("Restart (grace 0): time to ready / CPU seconds to ready / peak RSS at ready", "%s / %.2f s / %s", sec(f.ready), f.cpuReady, kbString(f.hwmReady))
		c.set("Restart: quiet after start / PATCHes besides the single changes'", "%s / %.0f", sec(f.quiet), f.writes)
		singleRows(c, "Restart: one change from ready", f.singles)
		c.set("Restart: peak RSS / CPU seconds, whole process", "%s / %.2f s", kbString(f.proc.hwm), f.proc.cpu)
	}
	if f := r.failover; f != nil {
		c.set("Failover: two replicas, leader elected and quiet after start", "%s", sec(f.leaderQuiet))
		c.set("Failover: warm standby's peak RSS / CPU seconds before it leads", "%s / %.2f s", kbString(f.standbyHWM), f.standbyCPU)
		c.set("Failover: leader's SIGTERM → standby leads", "%s", sec(f.takeover))
		c.set("Failover: quiet after takeover / PATCHes besides the single changes' / CPU seconds", "%s / %.0f / %.2f s", sec(f.quiet), f.writes, f.takeoverCPU)
		singleRows(c, "Failover: one change from takeover", f.singles)
		c.set("Failover: new leader's peak RSS / CPU seconds, whole process", "%s / %.2f s", kbString(f.proc.hwm), f.proc.cpu)
	}
}

func singleRows(c column, short string, p *phaseResult) {
	if p == nil {
		return
	}
	st := stats(p.latencies)
	c.set(fmt.Sprintf("%s: latency p50 / max (n=%d)", short, p.changes), "%s / %s", sec(st.p50), sec(st.max))
	c.set(short+": restarts / changes", "%d / %d%s", p.restarts, p.changes, missingNote(p))
}
