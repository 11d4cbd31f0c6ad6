package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The key bomb on a small cluster (--scenarios keybomb): the large sources
// of the default scenario (--large-sources ConfigMaps of --large-source-keys
// empty keys in a namespace nothing reads) on a cluster that has nothing
// else, where the controller's own heap is smallest and the transient of
// their first list shows most. In the default scenario a heap of 10-12 MiB
// hides part of it. Fresh controller starts alternate without and with
// them (--pairs times each: the ConfigMaps are created before each start
// with them and deleted after it), each measured from outside once ready
// and quiet; the first without also sees them created while it runs.

type keyBombRound struct {
	without, with startFigures
}

type keyBombResult struct {
	began  time.Time
	bytes  int64
	rounds []keyBombRound
	live   liveFigures // the first start without them, while they are created
	notes  []string
	heap   string // pprof tops of the first start with them
}

func keyBombReport(ctx context.Context, o options) string {
	r, err := runKeyBomb(ctx, o)
	if err != nil {
		fail("keybomb: %v", err)
	}
	return renderKeyBomb(o, r)
}

func runKeyBomb(ctx context.Context, o options) (*keyBombResult, error) {
	res := &keyBombResult{began: time.Now()}
	dir := filepath.Join(o.workDir, "keybomb")
	logf("=== keybomb: %d ConfigMaps of %d empty keys on an otherwise empty cluster, %d starts without and with them (%s)",
		o.largeSources, o.largeKeys, o.pairs, dir)
	sc := &scenario{name: "keybomb"}
	err := withCluster(ctx, o, dir, nil, func(ctx context.Context, e *env) error {
		e.res = &scaleRun{sc: sc, scale: 1}
		// The namespace first, so that its kube-root-ca.crt is there before
		// any controller counts its sources.
		if err := createNamespaces(ctx, e.cs, unrelatedNamespace); err != nil {
			return err
		}
		var err error
		if e.rec, err = startRecorder(ctx, e.cs); err != nil {
			return err
		}
		e.waitAPIQuiet(ctx)
		e.note("set-up")
		for i := range o.pairs {
			var round keyBombRound
			name := func(with string) string { return fmt.Sprintf("controller-keybomb-%d-%s.log", i+1, with) }
			if round.without, err = e.freshStart(ctx, name("without")); err != nil {
				return err
			}
			var counted float64
			if i == 0 {
				// While it runs: what the watch adds.
				res.live.hwmBefore, res.live.rssBefore, _ = e.proc.memory()
				res.live.heapBefore = round.without.heapInuse
				if counted, err = e.sourcesCached(); err != nil {
					return err
				}
			} else {
				e.finishProgram()
			}
			began := time.Now()
			if res.bytes, err = createLargeSources(ctx, e.cs, o.largeSources, o.largeKeys); err != nil {
				return err
			}
			if i == 0 {
				if err := e.waitSourcesCached(ctx, counted+float64(o.largeSources)); err != nil {
					return err
				}
				res.live.seenAfter = time.Since(began)
				e.settle(ctx)
				if res.live.heapAfter, err = e.heapInuse(filepath.Join(e.dir, "heap-keybomb-live.pb.gz")); err != nil {
					return err
				}
				res.live.hwmAfter, res.live.rssAfter, _ = e.proc.memory()
				e.finishProgram()
			}
			if round.with, err = e.freshStart(ctx, name("with")); err != nil {
				return err
			}
			e.finishProgram()
			if i == 0 {
				res.heap = profileTop(filepath.Join(e.dir, "heap-"+name("with")+".pb.gz"))
			}
			if err := deleteLargeSources(ctx, e, o.largeSources); err != nil {
				return err
			}
			logf("  round %d: peak RSS %s without, %s with (%+.1f MiB)", i+1, kbString(round.without.hwm), kbString(round.with.hwm),
				float64(round.with.hwm-round.without.hwm)/1024)
			res.rounds = append(res.rounds, round)
			e.note(fmt.Sprintf("round %d", i+1))
		}
		res.notes = e.res.notes // each says whether other heavy processes ran
		return nil
	})
	return res, err
}

// deleteLargeSources deletes the large ConfigMaps and waits until none is
// listed.
func deleteLargeSources(ctx context.Context, e *env, n int) error {
	for i := range n {
		if err := e.cs.CoreV1().ConfigMaps(unrelatedNamespace).Delete(ctx, largeName(i), metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting %s: %w", largeName(i), err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := e.cs.CoreV1().ConfigMaps(unrelatedNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("large sources still listed a minute after their deletion (%v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// growths are each round's peak RSS growth, kB.
func (r *keyBombResult) growths() []float64 {
	var out []float64
	for _, rd := range r.rounds {
		out = append(out, float64(rd.with.hwm-rd.without.hwm))
	}
	return out
}

func renderKeyBomb(o options, r *keyBombResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Scenario keybomb: run of %s\n\n", r.began.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- %d ConfigMaps of %d empty keys (%.1f MB in protobuf) in namespace %s, on a cluster with no other object the controller reads; config `%s`\n",
		o.largeSources, o.largeKeys, float64(r.bytes)/1e6, unrelatedNamespace, o.configFile)
	fmt.Fprintf(&b, "- Machine: %s\n- Controller: `%s` (%s), extra flags: `%s`, extra env: `%s`\n", machine(), o.controllerPath, o.version,
		strings.Join(o.controllerArgs, " "), strings.Join(o.controllerEnv, " "))
	b.WriteString("- Each start is a fresh process (grace 0), measured once ready and quiet: VmHWM from /proc, Go heap in use after a forced GC\n")
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n| round | peak RSS without | peak RSS with | growth | Go heap in use without / with |\n|---|---|---|---|---|\n")
	for i, rd := range r.rounds {
		fmt.Fprintf(&b, "| %d | %s | %s | %+.1f MiB | %s / %s |\n", i+1, kbString(rd.without.hwm), kbString(rd.with.hwm),
			float64(rd.with.hwm-rd.without.hwm)/1024, mib(rd.without.heapInuse), mib(rd.with.heapInuse))
	}
	g := spreadOf(r.growths())
	fmt.Fprintf(&b, "\nPeak RSS growth, fresh start: median **%+.1f MiB** (%+.1f to %+.1f MiB over %d rounds); target ≤ +%d MiB: %s.\n",
		g.median/1024, g.min/1024, g.max/1024, g.n, targetLargeKB>>10, mark(g.n > 0 && g.median <= targetLargeKB))
	fmt.Fprintf(&b, "Created while the first controller ran (cached after %s): peak RSS %s → %s (%+.1f MiB), Go heap in use %s → %s.\n",
		r.live.seenAfter.Round(time.Millisecond), kbString(r.live.hwmBefore), kbString(r.live.hwmAfter),
		float64(r.live.hwmAfter-r.live.hwmBefore)/1024, mib(r.live.heapBefore), mib(r.live.heapAfter))
	if r.heap != "" {
		fmt.Fprintf(&b, "\n<details><summary>Heap profile of the first start with them (in use after sync; allocated since start)</summary>\n\n```\n%s```\n</details>\n", r.heap)
	}
	return b.String()
}
