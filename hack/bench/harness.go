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
)

// etcdQuota leaves room for the ×4 scenario (about 1 GB of sources plus the
// history of every update until the API server compacts it).
const etcdQuota = "--quota-backend-bytes=8589934592"

// scaleRun holds the figures of one scenario at one scale, step by step.
type scaleRun struct {
	sc        *scenario
	scale     int
	objs      objectSet
	createDur time.Duration
	runs      []*programRun // in the order the programs ran
	pairs     []*pairRun    // the controller and the patcher again, each pair on a fresh cluster (scenario.pairs)
	second    *graceStartFigures
	large     *largeFigures
	restart   *restartFigures  // restart.go
	failover  *failoverFigures // restart.go
	notes     []string         // load and foreign heavy processes, per step
	others    string           // every foreign heavy process seen
	heapTop   string           // pprof -top of the controller's heap after sync, when its peak RSS is over target
}

// program returns the figures of a program, nil when it did not run.
func (r *scaleRun) program(name string) *programRun {
	for _, p := range r.runs {
		if p.prog == name {
			return p
		}
	}
	return nil
}

// env is what the steps of one scale share: one cluster, one watch of the
// workloads, and the program running now.
type env struct {
	o          options
	objs       objectSet
	cs         kubernetes.Interface // protobuf, high QPS
	raw        kubernetes.Interface // for the API server's /metrics
	rec        *recorder
	proc       *controllerProc // the program running now
	recording  bool            // it records applied checksums (the controller)
	kubeconfig string
	dir        string
	others     *contention
	res        *scaleRun
	step       string // prefixes the notes of a pair's steps
}

// withCluster starts a fresh local cluster in dir, runs f on it and stops
// it; the one way every scenario brings up its cluster.
func withCluster(ctx context.Context, o options, dir string, apiserverArgs []string, f func(ctx context.Context, e *env) error) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl, err := testcluster.Start(ctx, testcluster.Options{
		Dir: filepath.Join(dir, "cluster"), Log: logf, EtcdArgs: []string{etcdQuota},
		APIServerArgs: append(append([]string(nil), apiserverArgs...), o.apiserverArgs...),
	})
	if err != nil {
		return err
	}
	defer func() { stopCluster(cl, cancel, dir, o.keep, err != nil) }()
	e := &env{o: o, dir: dir, kubeconfig: cl.Kubeconfig, others: watchContention(ctx, o.workDir)}
	// The benchmark's own writes must not be what limits the phases, and
	// protobuf costs the API server (which shares the cores) least.
	fast := rest.CopyConfig(cl.RESTConfig)
	fast.QPS, fast.Burst = 5000, 10000
	fast.ContentType = "application/vnd.kubernetes.protobuf"
	fast.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if e.cs, err = kubernetes.NewForConfig(fast); err != nil {
		return err
	}
	if e.raw, err = kubernetes.NewForConfig(cl.RESTConfig); err != nil {
		return err
	}
	defer e.stopProgram() // still running only when a step failed
	return f(ctx, e)
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

// pairRun is the controller and the zero-logic patcher run again over a
// scale's objects, on a fresh cluster of their own.
type pairRun struct {
	n    int           // 2, 3, ...: the scale's full run is the first
	runs []*programRun // in the order they ran
}

// pairOrder is the order of pair n: the controller first in even pairs, the
// patcher first in odd ones (as in the full run), so that neither program
// always meets the cluster first.
func pairOrder(n int) []string {
	if n%2 == 0 {
		return []string{progController, progPatcher}
	}
	return []string{progPatcher, progController}
}

// runScenario runs a harness scenario once per scale, then its pairs.
func runScenario(ctx context.Context, o options, sc *scenario) ([]*scaleRun, error) {
	var out []*scaleRun
	for _, scale := range sc.scales {
		res := &scaleRun{sc: sc, scale: scale, objs: sc.objects(o, scale)}
		dir := filepath.Join(o.workDir, fmt.Sprintf("%s-x%d", sc.name, scale))
		logf("=== %s ×%d: %s (%s)", sc.name, scale, res.objs.summary(), dir)
		err := withCluster(ctx, o, dir, sc.apiserverArgs, func(ctx context.Context, e *env) error {
			e.objs, e.res = res.objs, res
			return e.runSteps(ctx)
		})
		if err != nil {
			return nil, fmt.Errorf("%s ×%d: %w", sc.name, scale, err)
		}
		for n := 2; n <= sc.pairs; n++ {
			p := &pairRun{n: n}
			dir := filepath.Join(o.workDir, fmt.Sprintf("%s-x%d-pair%d", sc.name, scale, n))
			logf("=== %s ×%d, pair %d of %d: %v on a fresh cluster (%s)", sc.name, scale, n, sc.pairs, pairOrder(n), dir)
			err := withCluster(ctx, o, dir, sc.apiserverArgs, func(ctx context.Context, e *env) error {
				e.objs, e.res, e.step = res.objs, res, fmt.Sprintf("pair %d: ", n)
				return e.runPair(ctx, p)
			})
			if err != nil {
				return nil, fmt.Errorf("%s ×%d, pair %d: %w", sc.name, scale, n, err)
			}
			res.pairs = append(res.pairs, p)
		}
		out = append(out, res)
	}
	return out, nil
}

// setUp creates the scale's objects and the benchmark's watch, and waits
// until kube-controller-manager is done with the new workloads.
func (e *env) setUp(ctx context.Context) error {
	began := time.Now()
	if err := e.objs.create(ctx, e.cs, e.res.sc.creators); err != nil {
		return err
	}
	d := time.Since(began)
	if e.res.createDur == 0 {
		e.res.createDur = d
	}
	logf("objects created in %s (%.0f MB of config data)", d.Round(time.Millisecond), float64(e.objs.dataBytes())/1e6)
	var err error
	if e.rec, err = startRecorder(ctx, e.cs); err != nil {
		return err
	}
	// Let kube-controller-manager finish with the new workloads (ReplicaSets,
	// revisions, status) before anything is measured.
	e.waitAPIQuiet(ctx)
	e.note("set-up")
	return nil
}

// runPair runs the controller and the patcher, in the pair's order, through
// the same phases as in the full run.
func (e *env) runPair(ctx context.Context, p *pairRun) error {
	e.others.take()
	if err := e.setUp(ctx); err != nil {
		return err
	}
	for _, prog := range pairOrder(p.n) {
		run, err := e.measureProgram(ctx, prog)
		if err != nil {
			return fmt.Errorf("%s: %w", prog, err)
		}
		p.runs = append(p.runs, run)
		e.waitAPIQuiet(ctx)
	}
	e.res.others = joinNonEmpty(e.res.others, e.others.take())
	return nil
}

// runSteps runs one scale: set-up, then each program in turn over the same
// objects, then the controller-only steps.
func (e *env) runSteps(ctx context.Context) error {
	e.others.take()
	if err := e.setUp(ctx); err != nil {
		return err
	}
	for _, prog := range e.res.sc.programs {
		p, err := e.measureProgram(ctx, prog)
		if err != nil {
			return fmt.Errorf("%s: %w", prog, err)
		}
		e.res.runs = append(e.res.runs, p)
		if prog == progController && e.res.program(progController) == p {
			// Its first run only: later ones are for the fan-out ratio.
			if err := e.controllerSteps(ctx, p); err != nil {
				return err
			}
		}
		// The next program starts on a cluster that is done with this one's
		// restarts (new ReplicaSets, status writes).
		e.waitAPIQuiet(ctx)
	}
	e.res.others = e.others.take()
	return nil
}

// controllerSteps are what only the controller runs, after its own phases:
// a second start with a grace period, and the large sources.
func (e *env) controllerSteps(ctx context.Context, p *programRun) error {
	var err error
	tg := e.res.sc.targets
	if tg.peakRSSKB > 0 && p.total.hwm > tg.peakRSSKB || tg.floorPeakRSS > 0 && e.floorExceeded(p) {
		e.res.heapTop = profileTop(e.heapFile())
	}
	if e.res.sc.graceStart {
		if e.res.second, err = e.measureGraceStart(ctx); err != nil {
			return err
		}
		e.note("second controller start")
	}
	if e.res.sc.restart {
		if e.res.restart, err = e.measureRestart(ctx); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		e.note("controller restart")
	}
	if e.res.sc.failover {
		if e.res.failover, err = e.measureFailover(ctx); err != nil {
			return fmt.Errorf("failover: %w", err)
		}
		e.note("failover")
	}
	if e.res.sc.large {
		// Last of the controller's: the large sources must not change what
		// the steps above measure.
		if e.res.large, err = e.measureLargeSources(ctx); err != nil {
			return err
		}
		e.note("large sources")
	}
	return nil
}

func (e *env) floorExceeded(p *programRun) bool {
	fl := e.res.program(progFloor)
	return fl != nil && float64(p.total.hwm) > e.res.sc.targets.floorPeakRSS*float64(fl.hwmReady)
}

// note records the load average and foreign heavy processes at a step.
func (e *env) note(step string) {
	others := e.others.take()
	line := fmt.Sprintf("%s%s: load average %s", e.step, step, loadAverage())
	if others != "" {
		line += "; **not clean**: other heavy processes ran: " + others
		e.res.others = joinNonEmpty(e.res.others, others)
	}
	logf("%s", line)
	e.res.notes = append(e.res.notes, line)
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

// waitAPIQuiet waits until kube-controller-manager has caught up with the
// new workloads: the API server's count of writes (POST, PUT, PATCH) has
// not moved for 5 s. It waits at most 5 minutes, or 36 ms per workload if
// that is longer: kube-controller-manager writes at 100 QPS, two or three
// writes per new workload (a ReplicaSet or revision, statuses), so 50,000
// workloads keep it busy for about 25 minutes.
func (e *env) waitAPIQuiet(ctx context.Context) {
	limit := 5 * time.Minute
	if e.objs != nil {
		limit = max(limit, time.Duration(e.objs.workloadCount())*36*time.Millisecond)
	}
	deadline := time.Now().Add(limit)
	last, lastChange := -1.0, time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		b, err := e.raw.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err == nil {
			var n float64
			for _, verb := range []string{"POST", "PUT", "PATCH"} {
				v, _ := metricSum(string(b), "apiserver_request_total", `verb="`+verb+`"`)
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
	logf("warning: API server writes still going after %s", limit)
}

type counters struct{ patches, writes, conflicts, patchSum, patchCount float64 }

// counters reads the API server's PATCH count and, for the controller, its
// own write and PATCH metrics.
func (e *env) counters(ctx context.Context) (counters, error) {
	var c counters
	var err error
	if c.patches, err = e.apiserverPatches(ctx); err != nil {
		return c, err
	}
	if !e.recording {
		return c, nil
	}
	m, err := e.proc.metrics()
	if err != nil {
		return c, err
	}
	c.writes, _ = metricSum(m, "deployment_restart_controller_deployment_annotation_updates_total")
	c.conflicts, _ = metricSum(m, "restart_controller_reconcile_errors_total", `reason="conflict"`)
	c.patchSum, _ = metricSum(m, "restart_controller_patch_duration_seconds_sum")
	c.patchCount, _ = metricSum(m, "restart_controller_patch_duration_seconds_count")
	return c, nil
}

// apiserverPatches is the API server's count of PATCH requests on workloads
// (every response code). Nothing but the program under test patches them.
func (e *env) apiserverPatches(ctx context.Context) (float64, error) {
	b, err := e.raw.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	var n float64
	for _, r := range []string{"deployments", "statefulsets", "daemonsets"} {
		v, _ := metricSum(string(b), "apiserver_request_total", `verb="PATCH"`, `resource="`+r+`"`, `subresource=""`)
		n += v
	}
	return n, nil
}

// settle waits for the program to be quiet; one that stays busy is worth a
// warning in the log, not the end of the run.
func (e *env) settle(ctx context.Context) {
	if err := e.waitQuiet(ctx); err != nil {
		logf("warning: %v", err)
	}
}

// waitQuiet waits until no workload annotation changed for 3 s and, for the
// controller, nothing is queued or under way.
func (e *env) waitQuiet(ctx context.Context) error {
	const quiet = 3 * time.Second
	deadline := time.Now().Add(5 * time.Minute)
	var state string
	for time.Now().Before(deadline) {
		idle := time.Since(e.rec.lastWriteSeen())
		state = fmt.Sprintf("last write %s ago", idle.Round(time.Millisecond))
		busy := idle < quiet
		if e.recording {
			m, err := e.proc.metrics()
			if err != nil {
				return err
			}
			depth, _ := metricSum(m, "workqueue_depth")
			inFlight, _ := metricSum(m, "restart_controller_reconciles_in_flight")
			waiting, _ := metricSum(m, "deployment_restart_controller_changes_waiting_total")
			state = fmt.Sprintf("queue depth %.0f, in flight %.0f, changes waiting %.0f, %s", depth, inFlight, waiting, state)
			busy = busy || depth != 0 || inFlight != 0 || waiting != 0
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("not quiet after 5 min: %s", state)
}
