package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// programRun is one program's figures in one scenario at one scale. Every
// program is measured the same way: from outside (/proc), its readiness
// from its own report, and latency by the benchmark's watch. The fields a
// program has no figure for stay zero.
type programRun struct {
	prog          string
	ready, readyz time.Duration // start → caches synced; readyz: first /readyz 200 (controller)
	cpuReady      float64       // CPU seconds to ready
	hwmReady      int64         // kB, VmHWM at ready
	steady        int64         // kB, VmRSS once idle (the controller: after recording every workload)
	anon, file    int64         // kB, RssAnon and RssFile then
	goMem         string        // the Go runtime's view then (controller)
	heapInuse     float64       // bytes, Go heap in use after sync, after a GC

	// The controller's initial recording of every workload's checksums.
	recorded      int
	recordDur     time.Duration // after ready
	recordCPU     float64
	recordWrites  float64 // PATCHes
	firstRestarts int     // restarts at first sight (must be 0)

	singles *phaseResult   // one change at a time, grace 0
	fanOut  []*phaseResult // N simultaneous changes, grace 0
	total   procFigures    // when it stopped

	cpuProfile, cpuFanOut string // pprof tops, with --cpu-profile-sync
	apiFanOut             string // the API server's, with --cpu-profile-sync
	traceFanOut           string // where goroutines waited, with --trace-fanout
}

// measureProgram starts a program, measures its start, sends it the
// scenario's phases and stops it.
func (e *env) measureProgram(ctx context.Context, prog string) (*programRun, error) {
	logf("--- %s", prog)
	p := &programRun{prog: prog}
	var err error
	if prog == progController {
		err = e.startControllerRun(ctx, p)
	} else {
		err = e.startReference(ctx, p)
	}
	if err != nil {
		return nil, err
	}
	e.note(prog + " start")
	if p.firstRestarts > 0 {
		// A later controller run finds the sources the patcher changed
		// since the first (the patcher writes no records) and restarts
		// their readers at start, as it should; its phases start once
		// those rollouts are done.
		e.waitAPIQuiet(ctx)
	}
	if prog != progFloor {
		if err := e.measurePhases(ctx, p); err != nil {
			return nil, err
		}
	}
	p.total = e.finishProgram()
	logf("%s: peak RSS %s whole run (sampled max %s), CPU %.2f s", prog, kbString(p.total.hwm), kbString(p.total.sampled), p.total.cpu)
	return p, nil
}

// measurePhases sends one change at a time, then each fan-out.
func (e *env) measurePhases(ctx context.Context, p *programRun) error {
	var err error
	if p.singles, err = e.runPhase(ctx, p.prog+": one change, grace 0", e.objs.singles(0, e.o.singles), false, 0, nil); err != nil {
		return err
	}
	e.note(p.prog + " single changes")
	for i, n := range e.res.sc.changes {
		none := func() string { return "" }
		top, apiTop, trace := none, none, none
		var profile func() // the last fan-out's profiles, started once the API server is quiet
		if i == len(e.res.sc.changes)-1 {
			profile = func() {
				name, at := strings.ReplaceAll(p.prog, " ", "-"), time.Now().Format("150405")
				if p.prog == progController {
					top = e.cpuProfile("cpu-fanout.pb.gz")
				}
				trace = e.trace(fmt.Sprintf("trace-fanout-%s-%s.out", name, at))
				apiTop = e.apiserverProfile(ctx, fmt.Sprintf("apiserver-fanout-%s-%s.pb.gz", name, at))
			}
		}
		ph, err := e.runPhase(ctx, fmt.Sprintf("%s: N=%d simultaneous changes, grace 0", p.prog, n), e.objs.fanOut(n), true, 0, profile)
		if err != nil {
			return err
		}
		ph.n = n
		p.fanOut = append(p.fanOut, ph)
		p.cpuFanOut = top()
		p.apiFanOut = apiTop()
		p.traceFanOut = trace()
		e.note(fmt.Sprintf("%s N=%d", p.prog, n))
	}
	return nil
}

// startControllerRun starts the controller (grace 0) and measures its
// start: the sync, then its recording of every workload's checksums.
func (e *env) startControllerRun(ctx context.Context, p *programRun) error {
	patchesBefore, err := e.apiserverPatches(ctx)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := e.startController("controller-grace0.log", 0); err != nil {
		return err
	}
	cpuProfile := e.cpuProfile("cpu-sync.pb.gz")
	if p.ready, p.readyz, err = e.proc.waitReady(ctx, 10*time.Minute); err != nil {
		return err
	}
	readyAt := time.Now()
	p.cpuReady, _ = e.proc.cpuSeconds()
	p.hwmReady, _, _ = e.proc.memory()
	logf("controller ready in %s, first /readyz 200 after %s (peak RSS so far %s, CPU %.2f s)", sec(p.ready), sec(p.readyz), kbString(p.hwmReady), p.cpuReady)
	if p.recorded, p.recordDur, err = e.waitRecorded(readyAt); err != nil {
		return err
	}
	e.settle(ctx)
	cpu, _ := e.proc.cpuSeconds()
	p.recordCPU = cpu - p.cpuReady
	p.cpuProfile = cpuProfile()
	patchesAfter, err := e.apiserverPatches(ctx)
	if err != nil {
		return err
	}
	p.recordWrites = patchesAfter - patchesBefore
	for _, n := range e.rec.restartsBetween(started, time.Now()) {
		p.firstRestarts += n
	}
	logf("initial recording: %d workloads %s after ready, %.0f PATCHes, %d restarts, CPU %.2f s",
		p.recorded, sec(p.recordDur), p.recordWrites, p.firstRestarts, p.recordCPU)
	_, p.steady, _ = e.proc.memory()
	p.anon, p.file = e.proc.rssParts()
	p.goMem = e.goMemory()
	if p.heapInuse, err = e.heapAfterSync(); err != nil {
		return err
	}
	// The first recording's annotation patches make kube-controller-manager
	// copy them onto every ReplicaSet and write every status (at 100 QPS,
	// half the controller's rate): measured on 2026-11-28, 271 ReplicaSet
	// and 411 status writes still ran during the single changes after a
	// recording of 500 workloads. The patcher records nothing, so its
	// phases met a quiet control plane and the controller's did not.
	e.waitAPIQuiet(ctx)
	e.note("controller's first recording, kube-controller-manager caught up")
	return nil
}

// startReference starts the floor or the zero-logic patcher and measures it
// once ready, and its RSS 3 s later.
func (e *env) startReference(ctx context.Context, p *programRun) error {
	role, extra, addr := floorRole, []string(nil), ""
	if p.prog == progPatcher {
		mapFile := filepath.Join(e.dir, "zerologic-map.txt")
		if err := writeZeroMap(mapFile, e.changedSources()); err != nil {
			return err
		}
		ports, err := testcluster.FreePorts(1)
		if err != nil {
			return err
		}
		addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
		role, extra = zeroLogicRole, []string{"--map", mapFile, "--metrics-address", addr}
	}
	var err error
	if p.ready, p.heapInuse, err = e.startHelper(ctx, p.prog, role, extra, role[2:]+".log", addr); err != nil {
		return err
	}
	p.cpuReady, _ = e.proc.cpuSeconds()
	p.hwmReady, _, _ = e.proc.memory()
	time.Sleep(3 * time.Second)
	_, p.steady, _ = e.proc.memory()
	p.anon, p.file = e.proc.rssParts()
	logf("%s: ready in %s, CPU %.2f s, peak RSS %s, steady RSS %s, heap in use %s", p.prog, sec(p.ready), p.cpuReady,
		kbString(p.hwmReady), kbString(p.steady), mib(p.heapInuse))
	return nil
}

// changedSources are the sources the phases change, each with its reader.
func (e *env) changedSources() []sourceRef {
	refs := e.objs.singles(0, e.o.singles)
	for _, n := range e.res.sc.changes {
		refs = append(refs, e.objs.fanOut(n)...)
	}
	return refs
}

// writeZeroMap writes the zero-logic patcher's map of the changed sources to
// their readers.
func writeZeroMap(file string, refs []sourceRef) error {
	var b strings.Builder
	for _, r := range refs {
		fmt.Fprintf(&b, "%s %s %s %s %s %s\n", r.kind, r.ns, r.name, r.wl.resource, r.wl.ns, r.wl.name)
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// startHelper starts a reference program and waits for its READY and HEAP
// lines: the floor is test/floor's program, the one the memory guard
// measures against (a binary of its own, so its pages are those of a small
// client-go program); the patcher is this binary in its helper role
// (floor.go).
func (e *env) startHelper(ctx context.Context, prog, role string, extra []string, logName, addr string) (ready time.Duration, heap float64, err error) {
	bin, args := e.o.floor, []string{"--kubeconfig", e.kubeconfig}
	if prog != progFloor {
		if bin, err = os.Executable(); err != nil {
			return 0, 0, err
		}
		args = append([]string{role}, append(args, extra...)...)
	}
	logPath := filepath.Join(e.dir, logName)
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	p, err := startProc(cmd, logPath, addr)
	if err != nil {
		return 0, 0, err
	}
	e.proc, e.recording = p, false
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(10 * time.Minute)
	for heap == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				return 0, 0, fmt.Errorf("%s exited:\n%s", role, p.logTail(20))
			}
			if v, ok := strings.CutPrefix(l, "READY "); ok {
				s, _ := strconv.ParseFloat(v, 64)
				ready = time.Duration(s * float64(time.Second))
			}
			if v, ok := strings.CutPrefix(l, "HEAP "); ok {
				heap, _ = strconv.ParseFloat(v, 64)
				heap = max(heap, 1)
			}
		case <-timeout:
			return 0, 0, fmt.Errorf("%s not ready within 10 min", role)
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	return ready, heap, nil
}

// waitRecorded waits until every workload carries its applied checksums and
// returns how many do and how long after readyAt the last one got them.
func (e *env) waitRecorded(readyAt time.Time) (int, time.Duration, error) {
	// One PATCH per workload at the controller's 200 QPS: 250 s for 50,000.
	limit := max(10*time.Minute, time.Duration(e.objs.workloadCount())*20*time.Millisecond)
	deadline := time.Now().Add(limit)
	for {
		n, last := e.rec.recorded()
		if n >= e.objs.workloadCount() {
			return n, max(last.Sub(readyAt), 0), nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("only %d/%d workloads recorded after %s:\n%s", n, e.objs.workloadCount(), limit, e.proc.logTail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cpuProfile starts a CPU profile of --cpu-profile-sync at once and returns
// what waits for its top functions; it returns "" without the flag.
func (e *env) cpuProfile(file string) func() string {
	if e.o.cpuProfileSync <= 0 {
		return func() string { return "" }
	}
	proc := e.proc
	top := make(chan string, 1)
	go func() { top <- proc.cpuProfile(filepath.Join(e.dir, file), e.o.cpuProfileSync) }()
	return func() string { return <-top }
}

// trace starts a Go execution trace of --trace-fanout of the program
// running at once and returns what waits for its summary: where its
// goroutines waited to run, on the network and in system calls (what a CPU
// profile cannot show: a PATCH slower at the client than on the API server
// spends the difference waiting). It returns "" without the flag.
func (e *env) trace(file string) func() string {
	if e.o.traceFanOut <= 0 {
		return func() string { return "" }
	}
	proc, path := e.proc, filepath.Join(e.dir, file)
	summary := make(chan string, 1)
	go func() {
		client := &http.Client{Timeout: e.o.traceFanOut + 30*time.Second}
		b, err := proc.fetch(client, fmt.Sprintf("/debug/pprof/trace?seconds=%d", int(e.o.traceFanOut.Seconds())))
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			summary <- fmt.Sprintf("trace: %v\n", err)
			return
		}
		summary <- traceTop(path)
	}()
	return func() string { return <-summary }
}

// traceTop turns a saved execution trace into pprof profiles of waiting
// (go tool trace -pprof) and returns their top functions.
func traceTop(path string) string {
	var out strings.Builder
	for _, kind := range []string{"sched", "net", "syscall"} {
		profile := strings.TrimSuffix(path, ".out") + "-" + kind + ".pprof"
		b, err := exec.Command("go", "tool", "trace", "-pprof="+kind, path).Output()
		if err == nil {
			err = os.WriteFile(profile, b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(&out, "go tool trace -pprof=%s: %v\n", kind, err)
			continue
		}
		out.WriteString(pprofTop(profile, []string{"-top", "-nodecount=20"}, []string{"-top", "-cum", "-nodecount=30"}))
	}
	return out.String()
}

// apiserverProfile starts a CPU profile of kube-apiserver (through its
// /debug/pprof, the admin client) of --cpu-profile-sync at once, so that
// what the API server does for each program in the same phase can be
// compared (go tool pprof -diff_base); it returns "" without the flag.
func (e *env) apiserverProfile(ctx context.Context, file string) func() string {
	if e.o.cpuProfileSync <= 0 {
		return func() string { return "" }
	}
	top := make(chan string, 1)
	go func() {
		path := filepath.Join(e.dir, file)
		b, err := e.raw.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(int(e.o.cpuProfileSync.Seconds()))).Timeout(e.o.cpuProfileSync + 30*time.Second).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			top <- fmt.Sprintf("API server CPU profile: %v\n", err)
			return
		}
		top <- pprofTop(path, []string{"-top", "-nodecount=25"}, []string{"-top", "-cum", "-nodecount=40"})
	}()
	return func() string { return <-top }
}

func (e *env) heapFile() string { return filepath.Join(e.dir, "heap-after-sync.pb.gz") }

// heapAfterSync saves a heap profile for heapTop and returns the Go heap in
// use.
func (e *env) heapAfterSync() (float64, error) {
	return e.heapInuse(e.heapFile())
}

// goMemory is the Go runtime's view of the controller's memory.
func (e *env) goMemory() string {
	m, err := e.proc.metrics()
	if err != nil {
		return "–"
	}
	v := func(name string) float64 { x, _ := metricSum(m, name); return x / (1 << 20) }
	return fmt.Sprintf("heap in use %.1f, idle %.1f of which released %.1f, next GC at %.1f, stacks %.1f, other runtime %.1f MiB",
		v("go_memstats_heap_inuse_bytes"), v("go_memstats_heap_idle_bytes"), v("go_memstats_heap_released_bytes"),
		v("go_memstats_next_gc_bytes"), v("go_memstats_stack_sys_bytes"),
		v("go_memstats_mspan_sys_bytes")+v("go_memstats_mcache_sys_bytes")+v("go_memstats_buck_hash_sys_bytes")+v("go_memstats_gc_sys_bytes")+v("go_memstats_other_sys_bytes"))
}

// graceStartFigures are the second controller's, started with grace period
// --grace on workloads that already carry their checksums.
type graceStartFigures struct {
	ready   time.Duration
	readyz  time.Duration
	writes  float64 // PATCHes after the start, before any change
	singles *phaseResult
	proc    procFigures
}

// measureGraceStart starts the second controller: it must not write at
// start-up, and each single change must wait for the grace period.
func (e *env) measureGraceStart(ctx context.Context) (*graceStartFigures, error) {
	f := &graceStartFigures{}
	patchesBefore, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.startController("controller-grace.log", e.o.grace); err != nil {
		return nil, err
	}
	if f.ready, f.readyz, err = e.proc.waitReady(ctx, 5*time.Minute); err != nil {
		return nil, err
	}
	logf("second controller (grace %s) ready in %s, first /readyz 200 after %s", e.o.grace, sec(f.ready), sec(f.readyz))
	time.Sleep(3 * time.Second) // anything it would write at start-up, it writes now
	e.settle(ctx)
	patchesAfter, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	f.writes = patchesAfter - patchesBefore
	if f.singles, err = e.runPhase(ctx, fmt.Sprintf("One change, grace %s", e.o.grace), e.objs.singles(1, e.o.singles), false, e.o.grace, nil); err != nil {
		return nil, err
	}
	f.proc = e.finishProgram()
	return f, nil
}

func (e *env) startController(logName string, grace time.Duration) error {
	p, err := startController(e.o, e.kubeconfig, filepath.Join(e.dir, logName), grace)
	if err != nil {
		return err
	}
	e.proc, e.recording = p, true
	return nil
}

// finishProgram stops the program and returns its totals, read before the
// process goes.
func (e *env) finishProgram() procFigures {
	totals := e.proc.totals()
	if err := e.proc.stop(); err != nil {
		logf("warning: %v", err)
	}
	e.proc = nil
	return totals
}

func (e *env) stopProgram() {
	if e.proc != nil {
		_ = e.proc.stop()
		e.proc = nil
	}
}

// profileTop summarises a heap profile: where memory is held after sync and
// where it was allocated since start (the transient decoding of the sync).
func profileTop(file string) string {
	return pprofTop(file, []string{"-top", "-nodecount=15", "-sample_index=inuse_space"}, []string{"-top", "-nodecount=15", "-sample_index=alloc_space"})
}
