package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/promtext"
	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// scaleAPIServerArgs let the API server take the scenario's creators and
// the controller's patches together (priority and fairness is off in
// testcluster, so these two limits are what applies).
var scaleAPIServerArgs = []string{"--max-requests-inflight=800", "--max-mutating-requests-inflight=400"}

// scaleFigures are every figure of the scale scenario.
type scaleFigures struct {
	spec      scaleSpec
	createDur time.Duration

	floor refFigures // __floor
	ctrl  ctrlFigures
	zero  refFigures // __zerologic

	ctrlSingles, ctrlFanOut *scalePhase
	zeroSingles, zeroFanOut *scalePhase

	cpuSync, cpuFanOut string // pprof tops, with --cpu-profile-sync
	heapTop            string
	notes              []string // load and contention per step
}

// refFigures are a helper process's (floor or zero-logic patcher).
type refFigures struct {
	ready     time.Duration
	cpu       float64
	hwm       int64 // kB at ready
	steady    int64 // kB VmRSS 3 s after ready
	heapInuse float64
	total     procFigures
}

type ctrlFigures struct {
	ready, readyz time.Duration
	cpu           float64
	hwmReady      int64
	recorded      int
	recordDur     time.Duration
	recordCPU     float64
	steady        int64  // kB VmRSS once recorded and quiet
	anon, file    int64  // kB RssAnon, RssFile then
	goMem         string // the Go runtime's view then
	heapInuse     float64
	total         procFigures
}

// scalePhase is one set of changes and the restarts that carried them.
type scalePhase struct {
	name      string
	changes   int
	latencies []time.Duration
	missing   int
	errs      int
	issueSpan time.Duration
	cpu       float64
	restarts  int // restarts of the targeted workloads
	extra     int // restarts beyond one per targeted workload
	stray     int
}

// scaleEnv is what the steps of the scenario share.
type scaleEnv struct {
	o          options
	s          scaleSpec
	cs         kubernetes.Interface
	rec        *scaleRecorder
	kubeconfig string
	dir        string
	others     *contention
	res        *scaleFigures
}

// runScaleScenario runs the whole scale scenario on one fresh cluster.
func runScaleScenario(ctx context.Context, o options) (*scaleFigures, error) {
	s := scaleSpec{workloads: o.scaleWorkloads, sources: o.scaleSources}
	dir := filepath.Join(o.workDir, "scale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf("=== scale: %d workloads over %d ConfigMaps and %d Secrets in %d namespaces (%s)", s.workloads, s.configMaps(), s.secrets(), scaleNamespaces, dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl, err := testcluster.Start(ctx, testcluster.Options{
		Dir: filepath.Join(dir, "cluster"), Log: logf, EtcdArgs: []string{etcdQuota},
		APIServerArgs: append(append([]string(nil), scaleAPIServerArgs...), o.apiserverArgs...),
	})
	if err != nil {
		return nil, err
	}
	failed := true
	defer func() { stopCluster(cl, cancel, dir, o.keep, failed) }()
	fast := rest.CopyConfig(cl.RESTConfig)
	fast.QPS, fast.Burst = 5000, 10000
	fast.ContentType = "application/vnd.kubernetes.protobuf"
	fast.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return nil, err
	}
	e := &scaleEnv{o: o, s: s, cs: cs, kubeconfig: cl.Kubeconfig, dir: dir, others: watchContention(ctx, o.workDir), res: &scaleFigures{spec: s}}
	if err := e.run(ctx); err != nil {
		return nil, err
	}
	failed = false
	return e.res, nil
}

// note records the load average and foreign heavy processes at a step.
func (e *scaleEnv) note(step string) {
	others := e.others.take()
	line := fmt.Sprintf("%s: load average %s", step, loadAverage())
	if others != "" {
		line += "; **not clean**: other heavy processes ran: " + others
	}
	logf("%s", line)
	e.res.notes = append(e.res.notes, line)
}

func (e *scaleEnv) run(ctx context.Context) error {
	r := e.res
	began := time.Now()
	e.others.take()
	if err := createScaleObjects(ctx, e.cs, e.s, e.o.scaleCreators); err != nil {
		return err
	}
	r.createDur = time.Since(began)
	logf("objects created in %s", r.createDur.Round(time.Millisecond))
	var err error
	if e.rec, err = startScaleRecorder(ctx, e.cs); err != nil {
		return err
	}
	// Let kube-controller-manager finish with the new workloads (ReplicaSets,
	// revisions, status) before anything is measured.
	e.waitAPIQuiet(ctx)
	e.note("set-up")

	if r.floor, err = e.measureRef(ctx, floorRole, nil, "floor.log"); err != nil {
		return err
	}
	e.note("floor")
	if err := e.measureController(ctx); err != nil {
		return err
	}
	singles, fanOut := e.changeSets()
	if err := e.writeZeroMap(append(append([]scaleRef(nil), singles...), fanOut...)); err != nil {
		return err
	}
	return e.measureZeroLogic(ctx, singles, fanOut)
}

// changeSets are the changes of the phases: singles on the last workloads
// (each kind, each reference form), the fan-out on the first ones, one
// source per workload.
func (e *scaleEnv) changeSets() (singles, fanOut []scaleRef) {
	for j := range e.o.singles {
		i := e.s.workloads - 1 - j
		refs := e.s.reads(i)
		singles = append(singles, refs[j%len(refs)])
	}
	for i := range min(e.o.scaleChanges, e.s.workloads-e.o.singles) {
		refs := e.s.reads(i)
		fanOut = append(fanOut, refs[i%len(refs)])
	}
	return singles, fanOut
}

// waitAPIQuiet waits (at most 5 min) until kube-controller-manager has
// caught up with the new workloads: the API server's count of writes
// (POST, PUT, PATCH) has not moved for 5 s.
func (e *scaleEnv) waitAPIQuiet(ctx context.Context) {
	deadline := time.Now().Add(5 * time.Minute)
	last, lastChange := -1.0, time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		b, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err == nil {
			var n float64
			for _, verb := range []string{"POST", "PUT", "PATCH"} {
				v, _ := promtext.Sum(string(b), "apiserver_request_total", `verb="`+verb+`"`)
				n += v
			}
			if n != last {
				last, lastChange = n, time.Now()
			} else if time.Since(lastChange) >= 5*time.Second {
				logf("API server writes quiet for 5 s")
				return
			}
		}
		time.Sleep(time.Second)
	}
	logf("warning: API server writes still going after 5 min")
}

// startHelper starts the bench binary in a helper role and waits for its
// READY and HEAP lines.
func (e *scaleEnv) startHelper(ctx context.Context, role string, extra []string, logName string) (*controllerProc, time.Duration, float64, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, 0, 0, err
	}
	logPath := filepath.Join(e.dir, logName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, 0, err
	}
	args := append([]string{role, "--kubeconfig", e.kubeconfig}, extra...)
	p := &controllerProc{logPath: logPath, done: make(chan struct{}), stopSample: make(chan struct{})}
	p.cmd = exec.Command(self, args...)
	p.cmd.Stderr = logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, 0, 0, err
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, 0, 0, err
	}
	p.pid = p.cmd.Process.Pid
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	go p.sample()
	var ready time.Duration
	var heap float64
	timeout := time.After(10 * time.Minute)
	for heap == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				return nil, 0, 0, fmt.Errorf("%s exited:\n%s", role, p.logTail(20))
			}
			f := strings.Fields(l)
			if len(f) == 2 && f[0] == "READY" {
				s, _ := strconv.ParseFloat(f[1], 64)
				ready = time.Duration(s * float64(time.Second))
			}
			if len(f) == 2 && f[0] == "HEAP" {
				heap, _ = strconv.ParseFloat(f[1], 64)
				heap = max(heap, 1)
			}
		case <-timeout:
			_ = p.cmd.Process.Kill()
			return nil, 0, 0, fmt.Errorf("%s not ready within 10 min", role)
		case <-ctx.Done():
			return nil, 0, 0, ctx.Err()
		}
	}
	return p, ready, heap, nil
}

// measureRef starts a helper, measures it once ready (and its RSS 3 s
// later), and stops it.
func (e *scaleEnv) measureRef(ctx context.Context, role string, extra []string, logName string) (refFigures, error) {
	var f refFigures
	p, ready, heap, err := e.startHelper(ctx, role, extra, logName)
	if err != nil {
		return f, err
	}
	f.ready, f.heapInuse = ready, heap
	f.cpu, _ = p.cpuSeconds()
	f.hwm, _, _ = p.memory()
	time.Sleep(3 * time.Second)
	_, f.steady, _ = p.memory()
	f.total = p.totals()
	_ = p.stop()
	logf("%s: ready in %s, CPU %.2f s, peak RSS %s, steady RSS %s, heap in use %.1f MiB", role, f.ready.Round(time.Millisecond), f.cpu,
		kbString(f.hwm), kbString(f.steady), f.heapInuse/(1<<20))
	return f, nil
}

// writeZeroMap writes the zero-logic patcher's map of the changed sources
// to their readers.
func (e *scaleEnv) writeZeroMap(refs []scaleRef) error {
	var b strings.Builder
	for _, r := range refs {
		fmt.Fprintf(&b, "%s %s %s %s %s %s\n", r.kind, e.s.sourceNS(r.kind, r.idx), scaleSourceName(r.kind, r.idx), wlResource(r.wl), scaleNS(r.wl), wlName(r.wl))
	}
	return os.WriteFile(filepath.Join(e.dir, "zerologic-map.txt"), []byte(b.String()), 0o644)
}

// measureController runs the controller (grace 0): start, sync, initial
// recording of every workload, one change at a time, then the fan-out.
func (e *scaleEnv) measureController(ctx context.Context) error {
	f := &e.res.ctrl
	ctrl, err := startController(e.o, e.kubeconfig, filepath.Join(e.dir, "controller.log"), 0)
	if err != nil {
		return err
	}
	defer func() {
		if ctrl != nil {
			_ = ctrl.stop()
		}
	}()
	var cpuSync chan string
	if e.o.cpuProfileSync > 0 {
		cpuSync = make(chan string, 1)
		go func() { cpuSync <- ctrl.cpuProfile(filepath.Join(e.dir, "cpu-sync.pb.gz"), e.o.cpuProfileSync) }()
	}
	if f.ready, f.readyz, err = ctrl.waitReady(ctx, 10*time.Minute); err != nil {
		return err
	}
	readyAt := time.Now()
	f.cpu, _ = ctrl.cpuSeconds()
	f.hwmReady, _, _ = ctrl.memory()
	logf("controller ready in %s (CPU %.2f s, peak RSS %s)", f.ready.Round(time.Millisecond), f.cpu, kbString(f.hwmReady))
	deadline := time.Now().Add(10 * time.Minute)
	for {
		n, last := e.rec.recorded()
		if n >= e.s.workloads {
			f.recorded, f.recordDur = n, max(last.Sub(readyAt), 0)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d/%d workloads recorded after 10 min:\n%s", n, e.s.workloads, ctrl.logTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitCtrlQuiet(ctx, ctrl)
	cpu, _ := ctrl.cpuSeconds()
	f.recordCPU = cpu - f.cpu
	logf("initial recording: %d workloads %s after ready, CPU %.2f s", f.recorded, f.recordDur.Round(time.Millisecond), f.recordCPU)
	if cpuSync != nil {
		e.res.cpuSync = <-cpuSync
	}
	_, f.steady, _ = ctrl.memory()
	f.anon, f.file = ctrl.rssParts()
	if m, err := ctrl.metrics(); err == nil {
		v := func(name string) float64 { x, _ := promtext.Sum(m, name); return x / (1 << 20) }
		f.goMem = fmt.Sprintf("heap in use %.1f, idle %.1f of which released %.1f, next GC at %.1f, stacks %.1f, other runtime %.1f MiB",
			v("go_memstats_heap_inuse_bytes"), v("go_memstats_heap_idle_bytes"), v("go_memstats_heap_released_bytes"),
			v("go_memstats_next_gc_bytes"), v("go_memstats_stack_sys_bytes"),
			v("go_memstats_mspan_sys_bytes")+v("go_memstats_mcache_sys_bytes")+v("go_memstats_buck_hash_sys_bytes")+v("go_memstats_gc_sys_bytes")+v("go_memstats_other_sys_bytes"))
	}
	heapFile := filepath.Join(e.dir, "heap-after-sync.pb.gz")
	if err := saveHeapProfile(ctrl, heapFile); err != nil {
		logf("warning: heap profile: %v", err)
	}
	if m, err := ctrl.metrics(); err == nil {
		f.heapInuse, _ = promtext.Sum(m, "go_memstats_heap_inuse_bytes")
	}
	e.note("controller start and initial recording")

	singles, fanOut := e.changeSets()
	e.res.ctrlSingles = e.runScalePhase(ctx, "controller: one change at a time", singles, false, ctrl)
	e.note("controller single changes")
	var cpuFan chan string
	if e.o.cpuProfileSync > 0 {
		cpuFan = make(chan string, 1)
		go func() { cpuFan <- ctrl.cpuProfile(filepath.Join(e.dir, "cpu-fanout.pb.gz"), e.o.cpuProfileSync) }()
	}
	e.res.ctrlFanOut = e.runScalePhase(ctx, fmt.Sprintf("controller: %d simultaneous changes", len(fanOut)), fanOut, true, ctrl)
	if cpuFan != nil {
		e.res.cpuFanOut = <-cpuFan
	}
	e.note("controller fan-out")
	f.total = ctrl.totals()
	if f.total.hwm > int64(1.3*float64(e.res.floor.hwm)) {
		e.res.heapTop = profileTop(heapFile)
	}
	err = ctrl.stop()
	ctrl = nil
	logf("controller: peak RSS %s whole run, CPU %.2f s", kbString(f.total.hwm), f.total.cpu)
	return err
}

// waitCtrlQuiet waits until the controller has nothing queued or in flight
// and no workload annotation changed for 3 s.
func (e *scaleEnv) waitCtrlQuiet(ctx context.Context, ctrl *controllerProc) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if m, err := ctrl.metrics(); err == nil {
			depth, _ := promtext.Sum(m, "workqueue_depth")
			inFlight, _ := promtext.Sum(m, "restart_controller_reconciles_in_flight")
			waiting, _ := promtext.Sum(m, "deployment_restart_controller_changes_waiting_total")
			if depth == 0 && inFlight == 0 && waiting == 0 && time.Since(e.rec.lastWriteSeen()) >= 3*time.Second {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	logf("warning: controller not quiet after 5 min")
}

// waitWritesQuiet waits until no workload restart was seen for 3 s.
func (e *scaleEnv) waitWritesQuiet(ctx context.Context) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil && time.Since(e.rec.lastWriteSeen()) < 3*time.Second {
		time.Sleep(200 * time.Millisecond)
	}
}

// measureZeroLogic runs the zero-logic patcher through the same changes.
func (e *scaleEnv) measureZeroLogic(ctx context.Context, singles, fanOut []scaleRef) error {
	f := &e.res.zero
	p, ready, heap, err := e.startHelper(ctx, zeroLogicRole, []string{"--map", filepath.Join(e.dir, "zerologic-map.txt")}, "zerologic.log")
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	f.ready, f.heapInuse = ready, heap
	f.cpu, _ = p.cpuSeconds()
	f.hwm, _, _ = p.memory()
	time.Sleep(3 * time.Second)
	_, f.steady, _ = p.memory()
	logf("zero-logic patcher ready in %s (peak RSS %s)", f.ready.Round(time.Millisecond), kbString(f.hwm))
	e.note("zero-logic patcher start")
	e.res.zeroSingles = e.runScalePhase(ctx, "zero-logic: one change at a time", singles, false, p)
	e.note("zero-logic single changes")
	e.res.zeroFanOut = e.runScalePhase(ctx, fmt.Sprintf("zero-logic: %d simultaneous changes", len(fanOut)), fanOut, true, p)
	e.note("zero-logic fan-out")
	f.total = p.totals()
	return nil
}

// runScalePhase issues the changes (from o.updaters goroutines at once, or
// one by one, each waiting for its restart) and measures each latency:
// update issued → the reader's first restart seen at or after it.
func (e *scaleEnv) runScalePhase(ctx context.Context, name string, refs []scaleRef, concurrent bool, proc *controllerProc) *scalePhase {
	logf("--- %s (%d changes)", name, len(refs))
	ph := &scalePhase{name: name, changes: len(refs)}
	issued := make([]time.Time, len(refs))
	errs := make([]error, len(refs))
	cpuBefore, _ := proc.cpuSeconds()
	start := time.Now()
	carried := func(i int) (time.Time, bool) { return e.rec.firstRestartAfter(refs[i].key(), issued[i]) }
	wait := func(idx []int, timeout time.Duration) {
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			pending := 0
			for _, i := range idx {
				if _, ok := carried(i); !ok && errs[i] == nil {
					pending++
				}
			}
			if pending == 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if concurrent {
		work := make(chan int, len(refs))
		for i := range refs {
			work <- i
		}
		close(work)
		var wg sync.WaitGroup
		for range min(e.o.updaters, len(refs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := newRand()
				for i := range work {
					issued[i] = time.Now()
					errs[i] = e.s.applyScaleChange(ctx, e.cs, refs[i], r)
				}
			}()
		}
		wg.Wait()
		all := make([]int, len(refs))
		for i := range all {
			all[i] = i
		}
		wait(all, 3*time.Minute)
	} else {
		r := newRand()
		for i := range refs {
			issued[i] = time.Now()
			errs[i] = e.s.applyScaleChange(ctx, e.cs, refs[i], r)
			wait([]int{i}, 30*time.Second)
			time.Sleep(200 * time.Millisecond)
		}
	}
	var last time.Time
	for i := range refs {
		if issued[i].After(last) {
			last = issued[i]
		}
		if errs[i] != nil {
			ph.errs++
			logf("  update %s/%d: %v", refs[i].kind, refs[i].idx, errs[i])
			continue
		}
		seen, ok := carried(i)
		if !ok {
			ph.missing++
			continue
		}
		ph.latencies = append(ph.latencies, seen.Sub(issued[i]))
	}
	ph.issueSpan = last.Sub(start)
	e.waitWritesQuiet(ctx)
	cpuAfter, _ := proc.cpuSeconds()
	ph.cpu = cpuAfter - cpuBefore
	targets := map[string]bool{}
	for _, r := range refs {
		targets[r.key()] = true
	}
	for key, n := range e.rec.restartsBetween(start, time.Now()) {
		if !targets[key] {
			ph.stray += n
			continue
		}
		ph.restarts += n
		ph.extra += n - 1
	}
	st := stats(ph.latencies)
	logf("  latency p50 %s p99 %s max %s; %d restarts (%d extra, %d stray), %d missing, %d errors; CPU %.2f s",
		sec(st.p50), sec(st.p99), sec(st.max), ph.restarts, ph.extra, ph.stray, ph.missing, ph.errs, ph.cpu)
	return ph
}
