package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/testcluster"

	"github.com/restart-controller/restart-controller/internal/promtext"
)

// etcdQuota leaves room for the ×4 scenario (about 1 GB of sources plus the
// history of every update until the API server compacts it).
const etcdQuota = "--quota-backend-bytes=8589934592"

// scaleResult holds the figures of one scale, step by step.
type scaleResult struct {
	scale   int
	sz      sizes
	setUp   setUpFigures
	sync    syncFigures
	singles *phaseResult   // one change at a time, grace 0
	fanOut  []*phaseResult // N simultaneous changes per phase, grace 0
	first   procFigures    // the grace-0 controller when it stopped
	second  graceStartFigures
	large   *largeFigures // --large-sources; nil when skipped

	others  string // foreign heavy processes seen during this scale
	heapTop string // pprof -top output of the heap after sync, when peak RSS is over target
}

type setUpFigures struct {
	sourceBytes int64
	createDur   time.Duration
}

// syncFigures are the first controller's start (grace period 0): its sync
// of every source and its recording of every Deployment's checksums.
type syncFigures struct {
	ready         time.Duration
	readyz        time.Duration // first /readyz 200
	cpu           float64
	hwm           int64 // kB
	recordDur     time.Duration
	recorded      int
	recordWrites  float64
	firstRestarts int // restarts at first sight (must be 0)
	heapInuse     float64
	cpuProfile    string // pprof -top output of the sync, with --cpu-profile-sync
}

// graceStartFigures are the second controller's, started with grace period
// o.grace.
type graceStartFigures struct {
	ready   time.Duration
	readyz  time.Duration
	writes  float64 // PATCHes after the start, before any change
	singles *phaseResult
	proc    procFigures
}

// env is what the steps of one scale share.
type env struct {
	o          options
	sz         sizes
	cs         kubernetes.Interface // protobuf, high QPS
	raw        kubernetes.Interface // for the API server's /metrics
	rec        *recorder
	ctrl       *controllerProc
	kubeconfig string
	dir        string
}

func runScale(ctx context.Context, o options, scale int) (_ *scaleResult, err error) {
	res := &scaleResult{scale: scale, sz: sizesFor(o, scale)}
	dir := filepath.Join(o.workDir, fmt.Sprintf("x%d", scale))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf("=== scale ×%d: %d ConfigMaps × %d kB, %d Secrets × %d kB, %d Deployments (%s)",
		scale, o.configMaps, o.configMapKB*scale, o.secrets, o.secretKB*scale, o.deployments, dir)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl, err := testcluster.Start(ctx, testcluster.Options{
		Dir:           filepath.Join(dir, "cluster"),
		Log:           logf,
		EtcdArgs:      []string{etcdQuota},
		APIServerArgs: o.apiserverArgs,
	})
	if err != nil {
		return nil, err
	}
	defer func() { stopCluster(cl, cancel, dir, o.keep, err != nil) }()
	e, err := newEnv(o, res.sz, dir, cl)
	if err != nil {
		return nil, err
	}
	defer e.stopController() // still running only when a step failed
	if err := e.runScenario(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

// runScenario runs the steps of one scale in order, each adding its figures
// to res.
func (e *env) runScenario(ctx context.Context, res *scaleResult) error {
	var err error
	if res.setUp, err = e.setUp(ctx); err != nil {
		return err
	}
	if res.sync, err = e.measureSync(ctx); err != nil {
		return err
	}
	// The fan-out phases change the first Deployments; the single changes use
	// the last ones, apart for each controller start, so that no earlier
	// change is still pending on a Deployment they measure.
	singlesFrom := e.o.deployments - 2*e.o.singles
	if res.singles, err = e.measureSingleChanges(ctx, "One change, grace 0", singlesFrom, 0); err != nil {
		return err
	}
	if res.fanOut, err = e.measureFanOut(ctx); err != nil {
		return err
	}
	res.first = e.finishController()
	logf("first controller: peak RSS %s (sampled max %s), CPU %.2f s", kbString(res.first.hwm), kbString(res.first.sampled), res.first.cpu)
	if res.second, err = e.measureGraceStart(ctx, singlesFrom+e.o.singles); err != nil {
		return err
	}
	// Last: the large sources must not change what the steps above measure.
	if e.o.largeSources > 0 {
		if res.large, err = e.measureLargeSources(ctx); err != nil {
			return err
		}
	}
	res.heapTop, err = e.heapTop(res.first.hwm)
	return err
}

// stopCluster cancels ctx first so that the recorder's watch ends before its
// server goes.
func stopCluster(cl *testcluster.Cluster, cancel context.CancelFunc, dir string, keep, failed bool) {
	if failed {
		logf("cluster logs:\n%s", cl.LogTail(15))
	}
	cancel()
	if err := cl.Stop(); err != nil {
		logf("stopping cluster: %v", err)
	}
	if !keep {
		_ = os.RemoveAll(filepath.Join(dir, "cluster", "etcd"))
	}
}

func newEnv(o options, sz sizes, dir string, cl *testcluster.Cluster) (*env, error) {
	e := &env{o: o, sz: sz, dir: dir, kubeconfig: cl.Kubeconfig}
	// The benchmark's own writes must not be what limits the phases, and
	// protobuf costs the API server (which shares the cores) least.
	fast := rest.CopyConfig(cl.RESTConfig)
	fast.QPS, fast.Burst = 1000, 2000
	fast.ContentType = "application/vnd.kubernetes.protobuf"
	fast.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	var err error
	if e.cs, err = kubernetes.NewForConfig(fast); err != nil {
		return nil, err
	}
	if e.raw, err = kubernetes.NewForConfig(cl.RESTConfig); err != nil {
		return nil, err
	}
	return e, nil
}

// setUp creates the sources and Deployments and starts the benchmark's watch
// of the Deployments.
func (e *env) setUp(ctx context.Context) (setUpFigures, error) {
	f := setUpFigures{sourceBytes: sourceBytes(e.o, e.sz)}
	began := time.Now()
	if err := createObjects(ctx, e.cs, e.o, e.sz, e.o.creators); err != nil {
		return f, err
	}
	f.createDur = time.Since(began)
	logf("objects created in %s (%.0f MB of config data)", f.createDur.Round(time.Millisecond), float64(f.sourceBytes)/1e6)
	var err error
	e.rec, err = startRecorder(ctx, e.cs)
	return f, err
}

// measureSync starts the first controller (grace period 0) and measures its
// start: the sync, then the recording of every Deployment's checksums.
func (e *env) measureSync(ctx context.Context) (syncFigures, error) {
	var f syncFigures
	patchesBefore, err := e.apiserverPatches(ctx)
	if err != nil {
		return f, err
	}
	if err := e.startController("controller-grace0.log", 0); err != nil {
		return f, err
	}
	cpuProfile := e.profileSync()
	if f.ready, f.readyz, err = e.ctrl.waitReady(ctx, 5*time.Minute); err != nil {
		return f, err
	}
	readyAt := time.Now()
	f.cpu, _ = e.ctrl.cpuSeconds()
	f.hwm, _, _ = e.ctrl.memory()
	logf("controller ready in %s, first /readyz 200 after %s (peak RSS so far %s, CPU %.2f s)", f.ready.Round(time.Millisecond), f.readyz.Round(time.Millisecond), kbString(f.hwm), f.cpu)

	if f.recorded, f.recordDur, err = e.waitRecorded(readyAt); err != nil {
		return f, err
	}
	e.settle(ctx)
	f.cpuProfile = cpuProfile()
	patchesAfter, err := e.apiserverPatches(ctx)
	if err != nil {
		return f, err
	}
	f.recordWrites = patchesAfter - patchesBefore
	for _, n := range e.rec.restartsBetween(time.Time{}, time.Now()) {
		f.firstRestarts += n
	}
	logf("initial recording: %d Deployments %s after ready, %.0f PATCHes, %d restarts",
		f.recorded, f.recordDur.Round(time.Millisecond), f.recordWrites, f.firstRestarts)
	f.heapInuse, err = e.heapAfterSync()
	return f, err
}

// waitRecorded waits until every Deployment carries its applied checksums and
// returns how many do and how long after readyAt the last one got them.
func (e *env) waitRecorded(readyAt time.Time) (int, time.Duration, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n, last := e.rec.recorded()
		if n >= e.o.deployments {
			return n, max(last.Sub(readyAt), 0), nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("only %d/%d Deployments recorded after 5 min:\n%s", n, e.o.deployments, e.ctrl.logTail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// profileSync starts the CPU profile of the sync (--cpu-profile-sync) at once,
// since the sync begins with the process, and returns what waits for its top
// functions.
func (e *env) profileSync() func() string {
	if e.o.cpuProfileSync <= 0 {
		return func() string { return "" }
	}
	ctrl := e.ctrl
	top := make(chan string, 1)
	go func() { top <- ctrl.cpuProfile(filepath.Join(e.dir, "cpu-sync.pb.gz"), e.o.cpuProfileSync) }()
	return func() string { return <-top }
}

func (e *env) heapFile() string { return filepath.Join(e.dir, "heap-after-sync.pb.gz") }

// heapAfterSync saves a heap profile for heapTop and returns the Go heap in
// use.
func (e *env) heapAfterSync() (float64, error) {
	if b, err := e.ctrl.get("/debug/pprof/heap?gc=1"); err != nil {
		logf("warning: heap profile: %v", err)
	} else if err := os.WriteFile(e.heapFile(), b, 0o644); err != nil {
		return 0, err
	}
	var inuse float64
	if m, err := e.ctrl.metrics(); err == nil {
		inuse, _ = promtext.Sum(m, "go_memstats_heap_inuse_bytes")
	}
	return inuse, nil
}

// measureSingleChanges changes one source of each of o.singles Deployments
// from the first on, one after the other, cycling through the four
// reference forms.
func (e *env) measureSingleChanges(ctx context.Context, name string, first int, grace time.Duration) (*phaseResult, error) {
	changes := make([]sourceRef, 0, e.o.singles)
	for j := range e.o.singles {
		changes = append(changes, readBy(first + j)[j%4])
	}
	return e.runPhase(ctx, name, changes, false, grace)
}

func (e *env) measureFanOut(ctx context.Context) ([]*phaseResult, error) {
	var phases []*phaseResult
	for _, n := range e.o.changes {
		p, err := e.runPhase(ctx, fmt.Sprintf("N=%d simultaneous changes, grace 0", n), simultaneous(n, e.o.deployments), true, 0)
		if err != nil {
			return nil, err
		}
		phases = append(phases, p)
	}
	return phases, nil
}

// simultaneous picks n changes: with n ≤ Deployments, one source for each of
// the first n Deployments, the ConfigMap volume and env forms alternating;
// beyond, both ConfigMaps of the first n/2 Deployments.
func simultaneous(n, deployments int) []sourceRef {
	out := make([]sourceRef, 0, n)
	for k := range n {
		if n <= deployments {
			out = append(out, readBy(k)[k%2])
		} else {
			out = append(out, readBy(k / 2)[k%2])
		}
	}
	return out
}

// measureGraceStart starts the second controller, with grace period o.grace,
// on Deployments that already carry their checksums: it must not write at
// start-up, and each single change must wait for the grace period.
func (e *env) measureGraceStart(ctx context.Context, singlesFrom int) (graceStartFigures, error) {
	var f graceStartFigures
	patchesBefore, err := e.apiserverPatches(ctx)
	if err != nil {
		return f, err
	}
	if err := e.startController("controller-grace.log", e.o.grace); err != nil {
		return f, err
	}
	if f.ready, f.readyz, err = e.ctrl.waitReady(ctx, 5*time.Minute); err != nil {
		return f, err
	}
	logf("second controller (grace %s) ready in %s, first /readyz 200 after %s", e.o.grace, f.ready.Round(time.Millisecond), f.readyz.Round(time.Millisecond))
	time.Sleep(3 * time.Second) // anything it would write at start-up, it writes now
	e.settle(ctx)
	patchesAfter, err := e.apiserverPatches(ctx)
	if err != nil {
		return f, err
	}
	f.writes = patchesAfter - patchesBefore
	if f.singles, err = e.measureSingleChanges(ctx, fmt.Sprintf("One change, grace %s", e.o.grace), singlesFrom, e.o.grace); err != nil {
		return f, err
	}
	f.proc = e.finishController()
	return f, nil
}

// heapTop summarises the heap profile after sync when the peak RSS is over
// target, to show where the memory went.
func (e *env) heapTop(peakKB int64) (string, error) {
	if peakKB <= targetRSSKB {
		return "", nil
	}
	top := profileTop(e.heapFile())
	return top, os.WriteFile(filepath.Join(e.dir, "heap-top.txt"), []byte(top), 0o644)
}

func (e *env) startController(logName string, grace time.Duration) error {
	var err error
	e.ctrl, err = startController(e.o, e.kubeconfig, filepath.Join(e.dir, logName), grace)
	return err
}

// finishController stops the controller and returns its totals, read before
// the process goes.
func (e *env) finishController() procFigures {
	totals := e.ctrl.totals()
	if err := e.ctrl.stop(); err != nil {
		logf("warning: %v", err)
	}
	e.ctrl = nil
	return totals
}

func (e *env) stopController() {
	if e.ctrl != nil {
		_ = e.ctrl.stop()
		e.ctrl = nil
	}
}

type counters struct{ patches, writes, conflicts, patchSum, patchCount float64 }

func (e *env) counters(ctx context.Context) (counters, error) {
	var c counters
	var err error
	if c.patches, err = e.apiserverPatches(ctx); err != nil {
		return c, err
	}
	m, err := e.ctrl.metrics()
	if err != nil {
		return c, err
	}
	c.writes, _ = promtext.Sum(m, "deployment_restart_controller_deployment_annotation_updates_total")
	c.conflicts, _ = promtext.Sum(m, "restart_controller_reconcile_errors_total", `reason="conflict"`)
	c.patchSum, _ = promtext.Sum(m, "restart_controller_patch_duration_seconds_sum")
	c.patchCount, _ = promtext.Sum(m, "restart_controller_patch_duration_seconds_count")
	return c, nil
}

// apiserverPatches is the API server's count of PATCH requests on
// Deployments (every response code). Nothing but the controller patches
// Deployments here.
func (e *env) apiserverPatches(ctx context.Context) (float64, error) {
	b, err := e.raw.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	v, _ := promtext.Sum(string(b), "apiserver_request_total", `verb="PATCH"`, `resource="deployments"`, `subresource=""`)
	return v, nil
}

// settle waits for the controller to be quiet; one that stays busy is worth
// a warning in the log, not the end of the run.
func (e *env) settle(ctx context.Context) {
	if err := e.waitQuiet(ctx); err != nil {
		logf("warning: %v", err)
	}
}

// waitQuiet waits until the controller has nothing queued or under way and no
// Deployment annotation changed for 3 s.
func (e *env) waitQuiet(ctx context.Context) error {
	const quiet = 3 * time.Second
	deadline := time.Now().Add(3 * time.Minute)
	var state string
	for time.Now().Before(deadline) {
		m, err := e.ctrl.metrics()
		if err == nil {
			depth, _ := promtext.Sum(m, "workqueue_depth")
			inFlight, _ := promtext.Sum(m, "restart_controller_reconciles_in_flight")
			waiting, _ := promtext.Sum(m, "deployment_restart_controller_changes_waiting_total")
			idle := time.Since(e.rec.lastWriteSeen())
			state = fmt.Sprintf("queue depth %.0f, in flight %.0f, changes waiting %.0f, last write %s ago", depth, inFlight, waiting, idle.Round(time.Millisecond))
			if depth == 0 && inFlight == 0 && waiting == 0 && idle >= quiet {
				return nil
			}
		} else {
			state = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("controller not quiet after 3 min: %s", state)
}

// profileTop summarises a heap profile: where memory is held after sync and
// where it was allocated since start (the transient decoding of the sync).
func profileTop(file string) string {
	return pprofTop(file, []string{"-top", "-nodecount=15", "-sample_index=inuse_space"}, []string{"-top", "-nodecount=15", "-sample_index=alloc_space"})
}
