// Command bench measures the restart controller, run as a real process, on a
// local control plane (internal/testcluster), beside two reference programs
// built into this binary: a memory floor (floor.go) and a zero-logic
// patcher (zerologic.go). One harness (harness.go, program.go, phase.go)
// brings up a cluster, creates a scenario's objects, runs each program over
// them and measures it from outside: peak RSS (VmHWM), CPU seconds, Go heap,
// readiness, and latency from a source update to the patched pod template.
// The scenarios are a table (scenario.go); one writer renders the Markdown
// report (report.go), and each run appends its headline figures to a trend
// file and redraws its plot (trend.go).
//
//	make bench BENCH_ARGS="[--scenarios default,fleet] [--scales 1,4] [--out FILE]"
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultScenarios are what `make bench` runs unless told otherwise.
const defaultScenarios = "default,fleet"

type options struct {
	controller     string // the copy that runs
	plugin         string // the operator CLI, for the status step
	statusRuns     int
	floor          string // the floor program (test/floor), built by make bench
	controllerPath string // as given
	version        string
	configFile     string
	controllerArgs []string
	controllerEnv  []string
	apiserverArgs  []string
	cpuProfileSync time.Duration
	traceFanOut    time.Duration
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
	pairs          int // default scenario: controller/patcher comparisons per scale, each on a fresh cluster
	workDir        string
	keep           bool
	out            string
	// The 10k scenario's sizes, and the 50k one's.
	scaleWorkloads, scaleSources, scaleChanges, scaleCreators int
	scaleRounds                                               int // 2.5k and 10k: controller runs, each between two patcher runs
	xlWorkloads, xlSources, xlChanges, xlCreators             int
	scenarios                                                 []string
	trend, plot                                               string // "" writes none
}

// listFlags are the flags given as one string that options holds as a list.
type listFlags struct {
	scales, changes, controllerArgs, controllerEnv, apiserverArgs, scenarios string
}

func main() {
	if role := helperRole(); role != "" {
		runHelper(role)
		return
	}
	o := parseOptions()
	scs, err := selectScenarios(o, o.scenarios)
	if err != nil {
		fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	prepareWorkDir(&o)

	began := time.Now()
	logf("work folder %s; load average %s; controller %s (%s)", o.workDir, loadAverage(), o.controllerPath, o.version)
	var report strings.Builder
	var runs []*scaleRun
	for _, sc := range scs {
		if sc.run != nil {
			report.WriteString(sc.run(ctx, o))
			continue
		}
		res, err := runScenario(ctx, o, sc)
		if err != nil {
			fail("%v", err)
		}
		runs = append(runs, res...)
		report.WriteString(renderScenario(o, sc, res, began))
	}
	report.WriteString(renderSlopes(runs))
	fmt.Println()
	fmt.Print(report.String())
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report.String()), 0o644); err != nil {
			fail("%v", err)
		}
		logf("report written to %s", o.out)
	}
	if err := recordTrend(o, runs, began); err != nil {
		fail("trend: %v", err)
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
	// --scale-workloads alone keeps its old meaning: run the 10k scenario.
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "scale-workloads" && l.scenarios == defaultScenarios {
			o.scenarios = []string{"10k"}
		}
	})
	o.validate()
	o.resolvePaths()
	return o
}

func defineFlags(o *options, l *listFlags) {
	flag.StringVar(&o.controller, "controller", "bin/restart-controller", "controller binary to measure")
	flag.StringVar(&o.plugin, "plugin", "bin/kubectl-restart_controller", "the operator CLI, whose status -A the status scenario measures (make plugin builds it)")
	flag.IntVar(&o.statusRuns, "status-runs", 3, "status scenario: runs of status -A, the last with -o json")
	flag.StringVar(&o.floor, "floor", "bin/floor", "the floor program (test/floor; the memory guard's floor, built by make bench)")
	flag.StringVar(&o.configFile, "config", "examples/config.yaml", "controller config file")
	flag.StringVar(&l.controllerArgs, "controller-args", "", "extra controller flags, space separated (e.g. \"--workers 16 --kube-api-qps 200 --kube-api-burst 400\")")
	flag.StringVar(&l.controllerEnv, "controller-env", "", "extra controller environment, space separated NAME=VALUE")
	flag.StringVar(&l.apiserverArgs, "apiserver-args", "", "extra kube-apiserver flags, space separated")
	flag.DurationVar(&o.cpuProfileSync, "cpu-profile-sync", 0, "if set, take a CPU profile of this length from the first controller's start (its sync) and add its top functions to the report; it slows the sync it measures")
	flag.DurationVar(&o.traceFanOut, "trace-fanout", 0, "if set, take a Go execution trace of this length from the controller and from the zero-logic patcher at the start of their last fan-out, and add where their goroutines waited (go tool trace -pprof=sched, net, syscall) to the report")
	flag.StringVar(&o.update, "update", "put", "how configs are changed: put (whole object, new data in every key, protobuf) or merge-patch (JSON merge patch of one key)")
	flag.StringVar(&l.scales, "scales", "1,4", "config size multipliers, one full run each")
	flag.IntVar(&o.configMaps, "configmaps", 2000, "ConfigMaps")
	flag.IntVar(&o.configMapKB, "configmap-kb", 100, "kB (1000 bytes) of data per ConfigMap at scale 1, over 10 keys")
	flag.IntVar(&o.secrets, "secrets", 2000, "Secrets")
	flag.IntVar(&o.secretKB, "secret-kb", 10, "kB of data per Secret at scale 1, over 10 keys")
	flag.IntVar(&o.deployments, "deployments", 500, "Deployments; each reads 2 ConfigMaps and 2 Secrets")
	flag.IntVar(&o.largeSources, "large-sources", 10, "ConfigMaps of --large-source-keys empty keys created in a namespace no workload uses, after the scenario, to measure what they cost; 0 skips that step")
	flag.IntVar(&o.largeKeys, "large-source-keys", 80000, "keys of each large source (80,000 empty keys make a 1 MB ConfigMap)")
	flag.IntVar(&o.fleet, "fleet", 60, "fleet scenario: Deployments of 1 replica on one ConfigMap, changed once with waves and once unpaced; 0 leaves the scenario out")
	flag.BoolVar(&o.fleetOnly, "fleet-only", false, "run only the fleet scenario (--scenarios fleet)")
	flag.StringVar(&l.changes, "changes", "200,1000", "sizes N of the simultaneous-change phases (N ≤ 2 × deployments)")
	flag.IntVar(&o.singles, "singles", 10, "sequential single changes per single-change phase")
	flag.DurationVar(&o.grace, "grace", 2*time.Second, "grace period of the second controller start (single changes with a grace period)")
	flag.IntVar(&o.pairs, "pairs", 3, "default scenario: times the controller and the zero-logic patcher are compared at each scale, each on a fresh cluster (the full run, then pairs of the two alone in alternate orders); the fan-out ratio reported is their median, with the spread")
	flag.IntVar(&o.creators, "creators", 16, "concurrent object creations")
	flag.IntVar(&o.updaters, "updaters", 100, "concurrent config updates in the simultaneous-change phases")
	flag.StringVar(&o.workDir, "workdir", "", "folder for clusters, controller logs and profiles (default: a new temp folder)")
	flag.BoolVar(&o.keep, "keep", false, "keep the etcd data of each cluster (otherwise removed after each scale)")
	flag.StringVar(&o.out, "out", "", "also write the Markdown report to this file")
	flag.StringVar(&l.scenarios, "scenarios", defaultScenarios, "scenarios to run, in order: default (the issue's, at --scales), keybomb (large sources on an otherwise empty cluster), 2.5k, 10k (--scale-workloads over --scale-sources), 50k (--xl-workloads over --xl-sources; opt-in, an hour or more), fleet (--fleet), status (status -A over the 10k scenario's objects)")
	flag.IntVar(&o.scaleWorkloads, "scale-workloads", 10000, "10k scenario: opted-in workloads (Deployments, StatefulSets, DaemonSets); given alone, runs --scenarios 10k")
	flag.IntVar(&o.scaleSources, "scale-sources", 30000, "10k scenario: small ConfigMaps and Secrets, half each (at least 2 per workload)")
	flag.IntVar(&o.scaleChanges, "scale-changes", 1000, "10k scenario: simultaneous changes, one per workload")
	flag.IntVar(&o.scaleRounds, "scale-rounds", 2, "2.5k and 10k scenarios: controller runs on the same cluster, each between two patcher runs (patcher, controller, patcher, controller, patcher, ...); the fan-out ratio is the median of each controller run against the patcher runs beside it (the 50k scenario runs the controller once)")
	flag.IntVar(&o.scaleCreators, "scale-creators", 64, "10k scenario: concurrent object creations")
	flag.IntVar(&o.xlWorkloads, "xl-workloads", 50000, "50k scenario (opt-in, an hour or more): opted-in workloads")
	flag.IntVar(&o.xlSources, "xl-sources", 160000, "50k scenario: small ConfigMaps and Secrets (3 read by each workload, the rest by none)")
	flag.IntVar(&o.xlChanges, "xl-changes", 1000, "50k scenario: simultaneous changes, one per workload")
	flag.IntVar(&o.xlCreators, "xl-creators", 128, "50k scenario: concurrent object creations")
	flag.StringVar(&o.trend, "trend", "BENCHMARKS.json", "append this run's headline figures to this JSON file (\"\" writes none)")
	flag.StringVar(&o.plot, "plot", "BENCHMARKS.svg", "redraw the trend file's plot into this SVG file (\"\" draws none)")
}

func (o *options) setLists(l listFlags) {
	var err error
	if o.scales, err = intList(l.scales); err != nil {
		fail("--scales: %v", err)
	}
	if o.changes, err = intList(l.changes); err != nil {
		fail("--changes: %v", err)
	}
	o.scenarios = strings.Split(l.scenarios, ",")
	if o.fleetOnly {
		o.scenarios = []string{"fleet"}
	}
	if o.fleet == 0 {
		o.scenarios = slices.DeleteFunc(o.scenarios, func(s string) bool { return s == "fleet" })
	}
	o.controllerArgs = strings.Fields(l.controllerArgs)
	o.controllerEnv = strings.Fields(l.controllerEnv)
	o.apiserverArgs = strings.Fields(l.apiserverArgs)
}

// validate checks what no scenario checks; each scenario checks its own
// sizes (scenario.validate).
func (o *options) validate() {
	if (slices.Contains(o.scenarios, "10k") || slices.Contains(o.scenarios, "status")) && o.scaleSources < 2*o.scaleWorkloads {
		fail("--scale-sources must be at least 2 × --scale-workloads")
	}
	if slices.Contains(o.scenarios, "status") && (o.scaleChanges < 0 || o.scaleChanges > o.scaleWorkloads) {
		fail("--scale-changes: 0 to --scale-workloads (one source of each of the first workloads)")
	}
	if slices.Contains(o.scenarios, "50k") && o.xlSources < 2*o.xlWorkloads {
		fail("--xl-sources must be at least 2 × --xl-workloads")
	}
	if o.update != "put" && o.update != "merge-patch" {
		fail("--update: want put or merge-patch, got %q", o.update)
	}
	if o.fleet < 0 || o.fleet > 100 || o.fleetOnly && o.fleet == 0 {
		fail("--fleet: 0 to 100 (the names are app-00 to app-99); --fleet-only needs one")
	}
	if o.scaleRounds < 1 || o.scaleRounds > 5 {
		fail("--scale-rounds: 1 to 5")
	}
	if o.pairs < 1 || o.pairs > 9 {
		fail("--pairs: 1 to 9")
	}
	if o.largeSources < 0 || o.largeSources > 99 || o.largeKeys < 1 {
		fail("--large-sources: 0 to 99, each of at least 1 key")
	}
	// 0 skips the default scenario's step; the keybomb scenario would then
	// compare starts with nothing added and report a growth it never caused.
	if slices.Contains(o.scenarios, "keybomb") && o.largeSources == 0 {
		fail("--scenarios keybomb needs --large-sources of at least 1 (it creates that many large sources)")
	}
	if o.configMaps < 2*o.deployments || o.secrets < 2*o.deployments {
		fail("need at least 2 ConfigMaps and 2 Secrets per Deployment")
	}
}

// resolvePaths makes every path absolute: the controller and the clusters run
// in other folders.
func (o *options) resolvePaths() {
	var err error
	for _, p := range []*string{&o.controller, &o.floor, &o.configFile} {
		if *p, err = filepath.Abs(*p); err != nil {
			fail("%v", err)
		}
		if _, err := os.Stat(*p); err != nil {
			fail("%v", err)
		}
	}
	if slices.Contains(o.scenarios, "status") {
		if o.plugin, err = filepath.Abs(o.plugin); err != nil {
			fail("%v", err)
		}
		if err := checkPlugin(o.plugin); err != nil {
			fail("%v", err)
		}
		if o.statusRuns < 1 {
			fail("--status-runs: at least 1")
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

// prepareWorkDir creates the work folder and points o.controller (and
// o.floor) at a snapshot of the binary in it: the binary under bin/ may be rebuilt while
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
	floor := filepath.Join(o.workDir, "floor")
	if err := snapshotBinary(o.floor, floor); err != nil {
		fail("copying the floor program: %v", err)
	}
	o.floor = floor
	o.version = controllerVersion(snapshot)
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
