package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// The status step (--scenarios status): the operator CLI's `status -A`
// (--plugin, `make plugin`) over the 10k scenario's objects
// (--scale-workloads over --scale-sources, scaleobjects.go), on a fresh
// cluster of its own. The controller records every workload's checksums
// and stops; then --scale-changes sources change, so that as many restarts
// are due with nothing acting on them, and status runs --status-runs times,
// each measured from outside: wall time and the peak RSS and CPU seconds of
// its process (rusage). With the controller down, all it shows comes from
// the objects, as in an incident.

// statusRun is one run of status -A.
type statusRun struct {
	wall      time.Duration
	maxRSSKB  int64
	user, sys float64
	exit      int
}

type statusFigures struct {
	summary  string
	created  time.Duration
	recorded int
	changes  int
	runs     []statusRun
	// From the JSON of the last run: the opted-in workloads it decided,
	// by action, and the changes in progress it found.
	decided  int
	actions  map[string]int
	inFlight int
	load     []string
}

func statusReport(ctx context.Context, o options) string {
	f, err := runStatus(ctx, o)
	if err != nil {
		fail("status: %v", err)
	}
	return renderStatus(o, f)
}

func runStatus(ctx context.Context, o options) (*statusFigures, error) {
	objs := scaleSpec{workloads: o.scaleWorkloads, sources: o.scaleSources}
	f := &statusFigures{summary: objs.summary(), changes: o.scaleChanges}
	dir := filepath.Join(o.workDir, "status")
	logf("=== status: %s (%s)", f.summary, dir)
	err := withCluster(ctx, o, dir, []string{"--max-requests-inflight=800", "--max-mutating-requests-inflight=400"}, func(ctx context.Context, e *env) error {
		e.objs = objs
		began := time.Now()
		if err := objs.create(ctx, e.cs, o.scaleCreators); err != nil {
			return err
		}
		f.created = time.Since(began)
		logf("objects created in %s", f.created.Round(time.Millisecond))
		var err error
		if e.rec, err = startRecorder(ctx, e.cs); err != nil {
			return err
		}
		e.waitAPIQuiet(ctx)
		if err := e.startController("controller-status.log", 0); err != nil {
			return err
		}
		if _, _, err := e.proc.waitReady(ctx, 10*time.Minute); err != nil {
			return err
		}
		if f.recorded, _, err = e.waitRecorded(time.Now()); err != nil {
			return err
		}
		e.settle(ctx)
		e.finishProgram() // down: nothing acts on the changes below
		if err := changeAll(ctx, e, objs.fanOut(o.scaleChanges), o.updaters); err != nil {
			return err
		}
		e.waitAPIQuiet(ctx)
		f.load = append(f.load, "before: load average "+loadAverage())
		for i := 0; i < o.statusRuns; i++ {
			r, out, err := runStatusOnce(ctx, o, e.kubeconfig, i == o.statusRuns-1)
			if err != nil {
				return err
			}
			logf("status -A run %d: %s, peak RSS %s, CPU %.2f s user + %.2f s system, exit %d", i+1, sec(r.wall), kbString(r.maxRSSKB), r.user, r.sys, r.exit)
			f.runs = append(f.runs, r)
			if out != nil {
				var rep struct {
					Workloads struct {
						OptedIn int            `json:"optedIn"`
						Actions map[string]int `json:"actions"`
					} `json:"workloads"`
					Changes []json.RawMessage `json:"changes"`
				}
				if err := json.Unmarshal(out, &rep); err != nil {
					return fmt.Errorf("status -o json: %w", err)
				}
				f.decided, f.actions, f.inFlight = rep.Workloads.OptedIn, rep.Workloads.Actions, len(rep.Changes)
			}
		}
		f.load = append(f.load, "after: load average "+loadAverage())
		return nil
	})
	return f, err
}

// runStatusOnce runs status -A (as JSON when asJSON, returning it; else the
// tables a person reads, discarded) and measures its process.
func runStatusOnce(ctx context.Context, o options, kubeconfig string, asJSON bool) (statusRun, []byte, error) {
	args := []string{"status", "-A", "--kubeconfig", kubeconfig, "--config", o.configFile}
	if asJSON {
		args = append(args, "-o", "json")
	}
	cmd := exec.CommandContext(ctx, o.plugin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	r := statusRun{wall: time.Since(began)}
	if cmd.ProcessState == nil {
		return r, nil, fmt.Errorf("running %s: %w", o.plugin, err)
	}
	r.exit = cmd.ProcessState.ExitCode()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSSKB = ru.Maxrss // kB on Linux
		r.user = time.Duration(ru.Utime.Nano()).Seconds()
		r.sys = time.Duration(ru.Stime.Nano()).Seconds()
	}
	if r.exit > 1 {
		return r, nil, fmt.Errorf("status -A: exit %d: %s", r.exit, stderr.String())
	}
	if asJSON {
		return r, stdout.Bytes(), nil
	}
	return r, nil, nil
}

func renderStatus(o options, f *statusFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## status -A over %d workloads\n\n", o.scaleWorkloads)
	fmt.Fprintf(&b, "%s; created in %s; the controller recorded all %d and stopped; then %d sources changed (as many restarts due, nothing acting on them).\n\n",
		f.summary, sec(f.created), f.recorded, f.changes)
	b.WriteString("| run | output | wall time | peak RSS | CPU user + system |\n|---|---|---|---|---|\n")
	for i, r := range f.runs {
		format := "tables"
		if i == len(f.runs)-1 {
			format = "-o json"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %.2f + %.2f s |\n", i+1, format, sec(r.wall), kbString(r.maxRSSKB), r.user, r.sys)
	}
	walls := make([]time.Duration, len(f.runs))
	for i, r := range f.runs {
		walls[i] = r.wall
	}
	slices.Sort(walls)
	if len(walls) > 0 {
		fmt.Fprintf(&b, "\nMedian wall time %s. ", sec(walls[len(walls)/2]))
	}
	var actions []string
	for _, a := range slices.Sorted(maps.Keys(f.actions)) {
		actions = append(actions, fmt.Sprintf("%s %d", a, f.actions[a]))
	}
	fmt.Fprintf(&b, "It decided %d opted-in workloads (%s) and found %d changes in progress. %s.\n\n",
		f.decided, strings.Join(actions, ", "), f.inFlight, strings.Join(f.load, "; "))
	return b.String()
}

// changeAll sends every change from up to updaters goroutines; nothing
// waits for restarts, as nothing makes them.
func changeAll(ctx context.Context, e *env, changes []sourceRef, updaters int) error {
	rng := newRand()
	work := make(chan func(context.Context, kubernetes.Interface) error, len(changes))
	for _, c := range changes {
		work <- e.objs.newChange(rng, c)
	}
	close(work)
	errs := make(chan error, updaters)
	var wg sync.WaitGroup
	for range min(updaters, len(changes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for apply := range work {
				if err := retryTransient(ctx, func() error { return apply(ctx, e.cs) }); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("changing the sources: %w", err)
	default:
		return nil
	}
}

// checkPlugin fails early when the status step has no plugin to run.
func checkPlugin(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--plugin: %w (make plugin builds it)", err)
	}
	return nil
}
