package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// largeFigures measure an attack on memory: ConfigMaps of many empty keys in a
// namespace no workload uses, created after the scenario's objects. Two
// fresh controller processes, started the same way on the same cluster, one
// before they exist and one after, give the start-up cost; the first one
// also sees them created while it runs.
type largeFigures struct {
	sources, keys int
	bytes         int64 // their protobuf encoding, together

	without startFigures // fresh start before they exist
	live    liveFigures  // that controller while they are created
	with    startFigures // fresh start once they exist
}

// startFigures are a fresh controller's, once ready and quiet.
type startFigures struct {
	ready     time.Duration
	hwm       int64   // kB, VmHWM: start, sync and initial decisions
	heapInuse float64 // bytes, after a forced GC
}

type liveFigures struct {
	hwmBefore, hwmAfter   int64 // kB
	rssBefore, rssAfter   int64 // kB
	heapBefore, heapAfter float64
	seenAfter             time.Duration // creation of the first → all in the controller's caches
}

// measureLargeSources runs the large-source step (--large-sources).
func (e *env) measureLargeSources(ctx context.Context) (*largeFigures, error) {
	f := &largeFigures{sources: e.o.largeSources, keys: e.o.largeKeys}
	logf("--- large sources: %d ConfigMaps of %d empty keys in namespace %s", f.sources, f.keys, unrelatedNamespace)
	var err error
	if f.without, err = e.freshStart(ctx, "controller-large-without.log"); err != nil {
		return nil, err
	}
	f.live.hwmBefore, f.live.rssBefore, _ = e.proc.memory()
	f.live.heapBefore = f.without.heapInuse
	counted, err := e.sourcesCached()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if f.bytes, err = createLargeSources(ctx, e.cs, f.sources, f.keys); err != nil {
		return nil, err
	}
	if err := e.waitSourcesCached(ctx, counted+float64(f.sources)); err != nil {
		return nil, err
	}
	f.live.seenAfter = time.Since(began)
	e.settle(ctx)
	f.live.heapAfter, err = e.heapInuse(filepath.Join(e.dir, "heap-large-live.pb.gz"))
	if err != nil {
		return nil, err
	}
	f.live.hwmAfter, f.live.rssAfter, _ = e.proc.memory()
	e.finishProgram()
	logf("  created while running (%.1f MB, cached after %s): peak RSS %s -> %s, RSS %s -> %s, heap in use %.1f -> %.1f MiB",
		float64(f.bytes)/1e6, f.live.seenAfter.Round(time.Millisecond), kbString(f.live.hwmBefore), kbString(f.live.hwmAfter),
		kbString(f.live.rssBefore), kbString(f.live.rssAfter), f.live.heapBefore/(1<<20), f.live.heapAfter/(1<<20))

	if f.with, err = e.freshStart(ctx, "controller-large-with.log"); err != nil {
		return nil, err
	}
	e.finishProgram()
	logf("  fresh start: peak RSS %s without them, %s with them (%+.1f MiB); heap in use %.1f / %.1f MiB",
		kbString(f.without.hwm), kbString(f.with.hwm), float64(f.with.hwm-f.without.hwm)/1024, f.without.heapInuse/(1<<20), f.with.heapInuse/(1<<20))
	return f, nil
}

// freshStart starts a controller (grace 0) on Deployments that carry their
// checksums already, and measures it once it is ready and quiet; it is left
// running.
func (e *env) freshStart(ctx context.Context, logName string) (startFigures, error) {
	var f startFigures
	if err := e.startController(logName, 0); err != nil {
		return f, err
	}
	var err error
	if f.ready, _, err = e.proc.waitReady(ctx, 5*time.Minute); err != nil {
		return f, err
	}
	time.Sleep(time.Second) // the decisions that follow the sync start at once
	e.settle(ctx)
	f.hwm, _, err = e.proc.memory()
	if err != nil {
		return f, err
	}
	f.heapInuse, err = e.heapInuse(filepath.Join(e.dir, "heap-"+logName+".pb.gz"))
	return f, err
}

// heapInuse saves a heap profile (taken after a forced GC) and returns the
// Go heap in use.
func (e *env) heapInuse(file string) (float64, error) {
	if err := saveHeapProfile(e.proc, file); err != nil {
		logf("warning: heap profile: %v", err)
	}
	m, err := e.proc.metrics()
	if err != nil {
		return 0, err
	}
	v, _ := metricSum(m, "go_memstats_heap_inuse_bytes")
	return v, nil
}

// sourcesCached is the controller's count of cached sources.
func (e *env) sourcesCached() (float64, error) {
	m, err := e.proc.metrics()
	if err != nil {
		return 0, err
	}
	v, _ := metricSum(m, "deployment_restart_controller_configs_total")
	return v, nil
}

func (e *env) waitSourcesCached(ctx context.Context, want float64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := e.sourcesCached()
		if err == nil && n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller caches %.0f sources, want %.0f (%v)", n, want, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// saveHeapProfile saves the controller's heap profile, taken after a GC.
func saveHeapProfile(p *controllerProc, file string) error {
	b, err := p.get("/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}
