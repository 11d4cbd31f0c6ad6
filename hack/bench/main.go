// Command bench measures the restart controller, run as a real process, on a
// local control plane (internal/testcluster): time to ready, peak RSS, CPU
// seconds, latency from a source update to the pod-template change for one
// change and for N simultaneous changes, restarts against changes, and API
// writes per restart. It runs the whole scenario once per scale, the source
// sizes multiplied by the scale, and prints one Markdown table.
//
//	make bench BENCH_ARGS="[--scales 1,4] [--out FILE]"   # or: go -C hack/bench build -o ../../bin/bench . && bin/bench --controller bin/restart-controller ...
//
// With --scale-workloads N it runs the scale scenario instead
// (scale.go): N workloads over --scale-sources small sources, beside a
// memory floor and a zero-logic patcher (floor.go, zerologic.go).
//
// `make bench` builds the controller and runs this.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	controller     string // the copy that runs
	controllerPath string // as given
	version        string
	configFile     string
	controllerArgs []string
	controllerEnv  []string
	apiserverArgs  []string
	cpuProfileSync time.Duration
	update         string
	scales         []int
	configMaps     int
	configMapKB    int
	secrets        int
	secretKB       int
	deployments    int
	largeSources   int
	largeKeys      int
	fleet          int  // fleet.go: Deployments of the paced/unpaced step; 0 skips it
	fleetOnly      bool // run only the fleet step
	changes        []int
	singles        int
	grace          time.Duration
	creators       int
	updaters       int
	workDir        string
	keep           bool
	out            string
	// The scale scenario (scale.go); off when scaleWorkloads is 0.
	scaleWorkloads, scaleSources, scaleChanges, scaleCreators int
}

// listFlags are the flags given as one string that options holds as a list.
type listFlags struct {
	scales, changes, controllerArgs, controllerEnv, apiserverArgs string
}

func main() {
	if role := helperRole(); role != "" {
		runHelper(role)
		return
	}
	o := parseOptions()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	prepareWorkDir(&o)

	began := time.Now()
	logf("work folder %s; load average %s; controller %s (%s)", o.workDir, loadAverage(), o.controllerPath, o.version)
	var report string
	switch {
	case o.scaleWorkloads > 0:
		res, err := runScaleScenario(ctx, o)
		if err != nil {
			fail("scale scenario: %v", err)
		}
		report = renderScaleReport(o, res, began)
	case o.fleetOnly:
		report = fleetReport(ctx, o)
	default:
		report = renderReport(o, runScales(ctx, o), began) + fleetReport(ctx, o)
	}
	fmt.Println()
	fmt.Print(report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			fail("%v", err)
		}
		logf("report written to %s", o.out)
	}
}

// parseOptions reads the command line and exits on anything the scenario
// cannot run with.
func parseOptions() options {
	var o options
	var l listFlags
	defineFlags(&o, &l)
	flag.Parse()
	if flag.NArg() > 0 {
		fail("unexpected arguments: %v", flag.Args())
	}
	o.setLists(l)
	o.validate()
	o.resolvePaths()
	return o
}

func defineFlags(o *options, l *listFlags) {
	flag.StringVar(&o.controller, "controller", "bin/restart-controller", "controller binary to measure")
	flag.StringVar(&o.configFile, "config", "examples/config.yaml", "controller config file")
	flag.StringVar(&l.controllerArgs, "controller-args", "", "extra controller flags, space separated (e.g. \"--workers 16 --kube-api-qps 200 --kube-api-burst 400\")")
	flag.StringVar(&l.controllerEnv, "controller-env", "", "extra controller environment, space separated NAME=VALUE")
	flag.StringVar(&l.apiserverArgs, "apiserver-args", "", "extra kube-apiserver flags, space separated")
	flag.DurationVar(&o.cpuProfileSync, "cpu-profile-sync", 0, "if set, take a CPU profile of this length from the first controller's start (its sync) and add its top functions to the report; it slows the sync it measures")
	flag.StringVar(&o.update, "update", "put", "how configs are changed: put (whole object, new data in every key, protobuf) or merge-patch (JSON merge patch of one key)")
	flag.StringVar(&l.scales, "scales", "1,4", "config size multipliers, one full run each")
	flag.IntVar(&o.configMaps, "configmaps", 2000, "ConfigMaps")
	flag.IntVar(&o.configMapKB, "configmap-kb", 100, "kB (1000 bytes) of data per ConfigMap at scale 1, over 10 keys")
	flag.IntVar(&o.secrets, "secrets", 2000, "Secrets")
	flag.IntVar(&o.secretKB, "secret-kb", 10, "kB of data per Secret at scale 1, over 10 keys")
	flag.IntVar(&o.deployments, "deployments", 500, "Deployments; each reads 2 ConfigMaps and 2 Secrets")
	flag.IntVar(&o.largeSources, "large-sources", 10, "ConfigMaps of --large-source-keys empty keys created in a namespace no workload uses, after the scenario, to measure what they cost; 0 skips that step")
	flag.IntVar(&o.largeKeys, "large-source-keys", 80000, "keys of each large source (80,000 empty keys make a 1 MB ConfigMap)")
	flag.IntVar(&o.fleet, "fleet", 60, "Deployments of 1 replica on one ConfigMap, changed once with waves and once unpaced on a cluster of their own after the scales; 0 skips that step")
	flag.BoolVar(&o.fleetOnly, "fleet-only", false, "run only the --fleet step")
	flag.StringVar(&l.changes, "changes", "200,1000", "sizes N of the simultaneous-change phases (N ≤ 2 × deployments)")
	flag.IntVar(&o.singles, "singles", 10, "sequential single changes per single-change phase")
	flag.DurationVar(&o.grace, "grace", 2*time.Second, "grace period of the second controller start (single changes with a grace period)")
	flag.IntVar(&o.creators, "creators", 16, "concurrent object creations")
	flag.IntVar(&o.updaters, "updaters", 100, "concurrent config updates in the simultaneous-change phases")
	flag.StringVar(&o.workDir, "workdir", "", "folder for clusters, controller logs and profiles (default: a new temp folder)")
	flag.BoolVar(&o.keep, "keep", false, "keep the etcd data of each cluster (otherwise removed after each scale)")
	flag.StringVar(&o.out, "out", "", "also write the Markdown report to this file")
	flag.IntVar(&o.scaleWorkloads, "scale-workloads", 0, "run the scale scenario (scale.go) instead of --scales: this many opted-in workloads (Deployments, StatefulSets, DaemonSets)")
	flag.IntVar(&o.scaleSources, "scale-sources", 30000, "scale scenario: small ConfigMaps and Secrets, half each (at least 2 per workload)")
	flag.IntVar(&o.scaleChanges, "scale-changes", 1000, "scale scenario: simultaneous changes, one per workload")
	flag.IntVar(&o.scaleCreators, "scale-creators", 64, "scale scenario: concurrent object creations")
}

func (o *options) setLists(l listFlags) {
	var err error
	if o.scales, err = intList(l.scales); err != nil {
		fail("--scales: %v", err)
	}
	if o.changes, err = intList(l.changes); err != nil {
		fail("--changes: %v", err)
	}
	o.controllerArgs = strings.Fields(l.controllerArgs)
	o.controllerEnv = strings.Fields(l.controllerEnv)
	o.apiserverArgs = strings.Fields(l.apiserverArgs)
}

func (o *options) validate() {
	if o.scaleWorkloads > 0 && (o.scaleSources < 2*o.scaleWorkloads || o.scaleChanges < 1 || o.singles > o.scaleWorkloads/2) {
		fail("--scale-sources must be at least 2 × --scale-workloads, --scale-changes at least 1")
	}
	if o.update != "put" && o.update != "merge-patch" {
		fail("--update: want put or merge-patch, got %q", o.update)
	}
	if o.fleet < 0 || o.fleet > 100 || o.fleetOnly && o.fleet == 0 {
		fail("--fleet: 0 to 100 (the names are app-00 to app-99); --fleet-only needs one")
	}
	if o.largeSources < 0 || o.largeSources > 99 || o.largeKeys < 1 {
		fail("--large-sources: 0 to 99, each of at least 1 key")
	}
	if o.configMaps < 2*o.deployments || o.secrets < 2*o.deployments {
		fail("need at least 2 ConfigMaps and 2 Secrets per Deployment")
	}
	for _, n := range o.changes {
		if n < 1 || n > 2*o.deployments {
			fail("--changes: %d is not in 1..%d", n, 2*o.deployments)
		}
	}
	// Each single-change phase takes its own Deployments (see runScale).
	if o.singles > o.deployments/2 {
		fail("--singles: at most %d", o.deployments/2)
	}
}

// resolvePaths makes every path absolute: the controller and the clusters run
// in other folders.
func (o *options) resolvePaths() {
	var err error
	for _, p := range []*string{&o.controller, &o.configFile} {
		if *p, err = filepath.Abs(*p); err != nil {
			fail("%v", err)
		}
		if _, err := os.Stat(*p); err != nil {
			fail("%v", err)
		}
	}
	if o.workDir == "" {
		if o.workDir, err = os.MkdirTemp("", "restart-bench-"); err != nil {
			fail("%v", err)
		}
	}
	if o.workDir, err = filepath.Abs(o.workDir); err != nil {
		fail("%v", err)
	}
}

// prepareWorkDir creates the work folder and points o.controller at a
// snapshot of the binary in it: the binary under bin/ may be rebuilt while
// this runs (go build replaces the file, so a hard link keeps the old one).
func prepareWorkDir(o *options) {
	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		fail("%v", err)
	}
	snapshot := filepath.Join(o.workDir, "restart-controller")
	if err := snapshotBinary(o.controller, snapshot); err != nil {
		fail("copying the controller: %v", err)
	}
	o.controllerPath, o.controller = o.controller, snapshot
	o.version = controllerVersion(snapshot)
}

// runScales runs the whole scenario once per scale, noting for each the
// foreign processes that competed with it for CPU.
func runScales(ctx context.Context, o options) []*scaleResult {
	others := watchContention(ctx, o.workDir)
	var results []*scaleResult
	for _, s := range o.scales {
		others.take()
		r, err := runScale(ctx, o, s)
		if err != nil {
			fail("scale ×%d: %v", s, err)
		}
		r.others = others.take()
		if r.others != "" {
			logf("warning: other heavy processes ran during scale ×%d: %s", s, r.others)
		}
		results = append(results, r)
	}
	return results
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

var logStart = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%7.1fs] %s\n", time.Since(logStart).Seconds(), fmt.Sprintf(format, args...))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

// machine describes where the figures come from.
func machine() string {
	mem := "?"
	if kb, err := kBFields("/proc/meminfo", "MemTotal:"); err == nil && kb[0] > 0 {
		mem = fmt.Sprintf("%.1f GiB", float64(kb[0])/(1<<20))
	}
	cpu := ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s RAM, %s %s/%s", runtime.NumCPU(), cpu, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// snapshotBinary hard-links the binary (same inode, same page cache, so the
// same resident text as running it in place) and copies it only when a link
// is impossible. A fresh copy is not neutral: its text comes from newly
// written page cache and measured about 6 MiB more file-backed RSS.
func snapshotBinary(from, to string) error {
	_ = os.Remove(to)
	if err := os.Link(from, to); err == nil {
		return nil
	}
	logf("warning: cannot hard-link %s into the work folder; measuring a copy, whose file-backed RSS may differ", from)
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}
