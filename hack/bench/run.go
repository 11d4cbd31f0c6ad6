package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/testcluster"

	"github.com/restart-controller/restart-controller/internal/promtext"
)

// etcdQuota leaves room for the ×4 scenario (about 1 GB of configs plus the
// history of every update until the API server compacts it).
const etcdQuota = "--quota-backend-bytes=8589934592"

type scaleResult struct {
	scale       int
	sz          sizes
	configBytes int64
	createDur   time.Duration
	protoWall   time.Duration // --compare-decoding
	protoCPU    float64

	// First controller process, grace period 0.
	ready1       time.Duration
	readyz1      time.Duration // first /readyz 200
	cpuReady1    float64
	hwmReady1    int64 // kB
	recordDur    time.Duration
	recorded     int
	recordWrites float64
	firstRestart int // restarts at first sight (must be 0)
	heapInuse    float64
	hwm1, rss1   int64
	anon1, file1 int64 // RssAnon, RssFile at the end
	sampled1     int64
	cpu1         float64
	phases       []*phaseResult

	// Second controller process, grace period o.grace.
	ready2       time.Duration
	readyz2      time.Duration
	writes2      float64 // PATCHes after the second start, before any change
	graceSingles *phaseResult
	hwm2         int64
	sampled2     int64
	cpu2         float64

	others     string // foreign heavy processes seen during this scale
	profile    string // pprof -top output when peak RSS is over target
	cpuProfile string // pprof -top output of the sync, with --cpu-profile-sync
}

// env is what the phases of one scale share.
type env struct {
	o    options
	sz   sizes
	cs   kubernetes.Interface // protobuf, high QPS
	raw  kubernetes.Interface // for the API server's /metrics
	rec  *recorder
	ctrl *controllerProc
	dir  string
}

func runScale(ctx context.Context, o options, scale int) (_ *scaleResult, err error) {
	res := &scaleResult{scale: scale, sz: sizesFor(o, scale)}
	res.configBytes = int64(o.configMaps)*int64(res.sz.cmKey)*keysPerConfig + int64(o.secrets)*int64(res.sz.secretKey)*keysPerConfig
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
	defer func() {
		if err != nil {
			logf("cluster logs:\n%s", cl.LogTail(15))
		}
		cancel() // stop the watch before its server goes
		if e := cl.Stop(); e != nil {
			logf("stopping cluster: %v", e)
		}
		if !o.keep {
			_ = os.RemoveAll(filepath.Join(dir, "cluster", "etcd"))
		}
	}()

	e := &env{o: o, sz: res.sz, dir: dir}
	fast := rest.CopyConfig(cl.RESTConfig)
	fast.QPS, fast.Burst = 1000, 2000
	fast.ContentType = "application/vnd.kubernetes.protobuf"
	fast.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if e.cs, err = kubernetes.NewForConfig(fast); err != nil {
		return nil, err
	}
	if e.raw, err = kubernetes.NewForConfig(cl.RESTConfig); err != nil {
		return nil, err
	}

	began := time.Now()
	if err := createObjects(ctx, e.cs, o, res.sz, o.creators); err != nil {
		return nil, err
	}
	res.createDur = time.Since(began)
	logf("objects created in %s (%.0f MB of config data)", res.createDur.Round(time.Millisecond), float64(res.configBytes)/1e6)

	if o.compareDecode {
		if res.protoWall, res.protoCPU, err = protobufSync(ctx, cl.RESTConfig); err != nil {
			return nil, err
		}
	}
	if e.rec, err = startRecorder(ctx, e.cs); err != nil {
		return nil, err
	}

	// ---- First controller: grace period 0.
	patches0, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	if e.ctrl, err = startController(o, cl.Kubeconfig, filepath.Join(dir, "controller-grace0.log"), 0); err != nil {
		return nil, err
	}
	defer func() {
		if e.ctrl != nil {
			_ = e.ctrl.stop()
		}
	}()
	var cpuProf chan string
	if o.cpuProfileSync > 0 {
		cpuProf = make(chan string, 1)
		go func() { cpuProf <- e.ctrl.cpuProfile(filepath.Join(dir, "cpu-sync.pb.gz"), o.cpuProfileSync) }()
	}
	if res.ready1, res.readyz1, err = e.ctrl.waitReady(ctx, 5*time.Minute); err != nil {
		return nil, err
	}
	readyAt := time.Now()
	res.cpuReady1, _ = e.ctrl.cpuSeconds()
	res.hwmReady1, _, _ = e.ctrl.memory()
	logf("controller ready in %s, first /readyz 200 after %s (peak RSS so far %s, CPU %.2f s)", res.ready1.Round(time.Millisecond), res.readyz1.Round(time.Millisecond), kbString(res.hwmReady1), res.cpuReady1)

	// Initial recording: every Deployment gets its applied checksums.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n, last := e.rec.recorded()
		if n >= o.deployments {
			res.recorded = n
			res.recordDur = max(last.Sub(readyAt), 0)
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d/%d Deployments recorded after 5 min:\n%s", n, o.deployments, e.ctrl.logTail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.waitQuiet(ctx); err != nil {
		logf("warning: %v", err)
	}
	if cpuProf != nil {
		res.cpuProfile = <-cpuProf
	}
	patches1, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	res.recordWrites = patches1 - patches0
	for _, n := range e.rec.restartsBetween(time.Time{}, time.Now()) {
		res.firstRestart += n
	}
	logf("initial recording: %d Deployments %s after ready, %.0f PATCHes, %d restarts",
		res.recorded, res.recordDur.Round(time.Millisecond), res.recordWrites, res.firstRestart)

	heapFile := filepath.Join(dir, "heap-after-sync.pb.gz")
	if b, err := e.ctrl.get("/debug/pprof/heap?gc=1"); err != nil {
		logf("warning: heap profile: %v", err)
	} else if err := os.WriteFile(heapFile, b, 0o644); err != nil {
		return nil, err
	}
	if m, err := e.ctrl.metrics(); err == nil {
		res.heapInuse, _ = promtext.Sum(m, "go_memstats_heap_inuse_bytes")
	}

	// Phases of the first controller.
	base := o.deployments - 2*o.singles // single changes use the last Deployments
	var singles []configRef
	for j := range o.singles {
		singles = append(singles, readBy(base + j)[j%4])
	}
	p, err := e.runPhase(ctx, "One change, grace 0", singles, false, 0)
	if err != nil {
		return nil, err
	}
	res.phases = append(res.phases, p)
	for _, n := range o.changes {
		p, err := e.runPhase(ctx, fmt.Sprintf("N=%d simultaneous changes, grace 0", n), simultaneous(n, o.deployments), true, 0)
		if err != nil {
			return nil, err
		}
		res.phases = append(res.phases, p)
	}
	res.hwm1, res.rss1, _ = e.ctrl.memory()
	res.anon1, res.file1 = e.ctrl.rssParts()
	res.cpu1, _ = e.ctrl.cpuSeconds()
	res.sampled1 = e.ctrl.sampledMaxRSSKB()
	if err := e.ctrl.stop(); err != nil {
		logf("warning: %v", err)
	}
	e.ctrl = nil
	logf("first controller: peak RSS %s (sampled max %s), CPU %.2f s", kbString(res.hwm1), kbString(res.sampled1), res.cpu1)

	// ---- Second controller: grace period o.grace.
	patches2, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	if e.ctrl, err = startController(o, cl.Kubeconfig, filepath.Join(dir, "controller-grace.log"), o.grace); err != nil {
		return nil, err
	}
	if res.ready2, res.readyz2, err = e.ctrl.waitReady(ctx, 5*time.Minute); err != nil {
		return nil, err
	}
	logf("second controller (grace %s) ready in %s, first /readyz 200 after %s", o.grace, res.ready2.Round(time.Millisecond), res.readyz2.Round(time.Millisecond))
	time.Sleep(3 * time.Second) // anything it would write at start-up, it writes now
	if err := e.waitQuiet(ctx); err != nil {
		logf("warning: %v", err)
	}
	patches3, err := e.apiserverPatches(ctx)
	if err != nil {
		return nil, err
	}
	res.writes2 = patches3 - patches2
	singles = singles[:0]
	for j := range o.singles {
		singles = append(singles, readBy(base + o.singles + j)[j%4])
	}
	if res.graceSingles, err = e.runPhase(ctx, fmt.Sprintf("One change, grace %s", o.grace), singles, false, o.grace); err != nil {
		return nil, err
	}
	res.hwm2, _, _ = e.ctrl.memory()
	res.cpu2, _ = e.ctrl.cpuSeconds()
	res.sampled2 = e.ctrl.sampledMaxRSSKB()
	if err := e.ctrl.stop(); err != nil {
		logf("warning: %v", err)
	}
	e.ctrl = nil

	if res.hwm1 > targetRSSKB {
		res.profile = profileTop(heapFile)
		if err := os.WriteFile(filepath.Join(dir, "heap-top.txt"), []byte(res.profile), 0o644); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// simultaneous picks n changes: with n ≤ Deployments, one config for each of
// the first n Deployments, the ConfigMap volume and env forms alternating;
// beyond, both ConfigMaps of the first n/2 Deployments.
func simultaneous(n, deployments int) []configRef {
	out := make([]configRef, 0, n)
	for k := range n {
		if n <= deployments {
			out = append(out, readBy(k)[k%2])
		} else {
			out = append(out, readBy(k / 2)[k%2])
		}
	}
	return out
}

type phaseResult struct {
	name       string
	changes    int
	grace      time.Duration
	latencies  []time.Duration // update issued → carrying restart seen
	sinceDone  []time.Duration // update returned → carrying restart seen
	returned   []time.Duration // update call duration
	missing    int             // changes no restart carried in time
	updateErrs int
	deps       int // Deployments the changes target
	restarts   int // restarts of those
	once       int // of those restarted exactly once
	maxPerDep  int
	stray      int // restarts of Deployments no change targets
	patches    float64
	ctrlWrites float64
	conflicts  float64
	wall       time.Duration // first update issued → last carrying restart seen
	cpu        float64       // controller CPU seconds from the first update to quiet
	patchMean  time.Duration // mean duration of the controller's PATCH calls
	issueSpan  time.Duration // first update issued → last update issued
}

// runPhase issues the changes (all at once from o.updaters goroutines, or one
// after the other, each waiting for its restart) and measures them.
func (e *env) runPhase(ctx context.Context, name string, changes []configRef, concurrent bool, grace time.Duration) (*phaseResult, error) {
	logf("--- %s (%d changes)", name, len(changes))
	r := &phaseResult{name: name, changes: len(changes), grace: grace}
	before := make([]string, len(changes))
	bodies := make([]change, len(changes))
	targets := map[string]bool{}
	rng := newRand()
	for i, c := range changes {
		before[i] = e.rec.applied(depName(c.dep))[c.id()]
		if before[i] == "" {
			return nil, fmt.Errorf("%s has no applied checksum for %s", depName(c.dep), c.id())
		}
		bodies[i] = prepareChange(rng, c, c.index, e.sz, e.o.update)
		targets[depName(c.dep)] = true
	}
	r.deps = len(targets)
	m0, err := e.counters(ctx)
	if err != nil {
		return nil, err
	}
	issued := make([]time.Time, len(changes))
	returned := make([]time.Time, len(changes))
	errs := make([]error, len(changes))
	update := func(i int) {
		issued[i] = time.Now()
		errs[i] = applyChange(ctx, e.cs, changes[i], bodies[i])
		returned[i] = time.Now()
	}
	waitCarried := func(idx []int, timeout time.Duration) {
		deadline := time.Now().Add(timeout)
		for {
			pending := 0
			for _, i := range idx {
				if errs[i] != nil {
					continue
				}
				if _, ok := e.rec.carried(depName(changes[i].dep), changes[i].id(), before[i], issued[i]); !ok {
					pending++
				}
			}
			if pending == 0 || time.Now().After(deadline) || ctx.Err() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	cpu0, _ := e.ctrl.cpuSeconds()
	start := time.Now()
	if concurrent {
		work := make(chan int, len(changes))
		for i := range changes {
			work <- i
		}
		close(work)
		var wg sync.WaitGroup
		for range min(e.o.updaters, len(changes)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					update(i)
				}
			}()
		}
		wg.Wait()
		all := make([]int, len(changes))
		for i := range all {
			all[i] = i
		}
		waitCarried(all, 3*time.Minute)
	} else {
		for i := range changes {
			update(i)
			waitCarried([]int{i}, 30*time.Second+grace)
			time.Sleep(200 * time.Millisecond) // let the Deployment controller's own write pass
		}
	}
	var lastIssued time.Time
	for _, t := range issued {
		if t.After(lastIssued) {
			lastIssued = t
		}
	}
	r.issueSpan = lastIssued.Sub(start)
	var lastSeen time.Time
	for i, c := range changes {
		if errs[i] != nil {
			r.updateErrs++
			logf("  update %s: %v", c.id(), errs[i])
			continue
		}
		r.returned = append(r.returned, returned[i].Sub(issued[i]))
		seen, ok := e.rec.carried(depName(c.dep), c.id(), before[i], issued[i])
		if !ok {
			r.missing++
			continue
		}
		r.latencies = append(r.latencies, seen.Sub(issued[i]))
		r.sinceDone = append(r.sinceDone, seen.Sub(returned[i]))
		if seen.After(lastSeen) {
			lastSeen = seen
		}
		if !concurrent {
			logf("  %-28s %s (%s): %s", c.id(), depName(c.dep), c.form, seen.Sub(issued[i]).Round(time.Millisecond))
		}
	}
	if !lastSeen.IsZero() {
		r.wall = lastSeen.Sub(start)
	}
	if err := e.waitQuiet(ctx); err != nil {
		logf("warning: %v", err)
	}
	end := time.Now()
	cpu1, _ := e.ctrl.cpuSeconds()
	r.cpu = cpu1 - cpu0
	m1, err := e.counters(ctx)
	if err != nil {
		return nil, err
	}
	r.patches = m1.patches - m0.patches
	r.ctrlWrites = m1.writes - m0.writes
	r.conflicts = m1.conflicts - m0.conflicts
	if n := m1.patchCount - m0.patchCount; n > 0 {
		r.patchMean = time.Duration((m1.patchSum - m0.patchSum) / n * float64(time.Second))
	}
	for dep, n := range e.rec.restartsBetween(start, end) {
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
	st := stats(r.latencies)
	logf("  latency p50 %s p90 %s p99 %s max %s; restarts %d for %d changes on %d Deployments (%d exactly once, %d stray, %d missing); %.0f PATCHes, %.0f conflicts; controller CPU %.2f s",
		sec(st.p50), sec(st.p90), sec(st.p99), sec(st.max), r.restarts, r.changes, r.deps, r.once, r.stray, r.missing, r.patches, r.conflicts, r.cpu)
	return r, nil
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
	var out string
	for _, idx := range []string{"inuse_space", "alloc_space"} {
		b, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", "-sample_index="+idx, file).CombinedOutput()
		if err != nil {
			out += fmt.Sprintf("go tool pprof (%s): %v\n%s\n", idx, err, b)
			continue
		}
		out += fmt.Sprintf("$ go tool pprof -top -nodecount=15 -sample_index=%s %s\n%s\n", idx, filepath.Base(file), b)
	}
	return out
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
