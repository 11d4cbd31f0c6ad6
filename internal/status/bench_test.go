package status

import (
	"fmt"
	"testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// scaleWorld is the benchmark's cluster of 10,000 workloads (the bench's
// 10k scenario: hack/bench/scaleobjects.go), over ten namespaces, each
// reading a ConfigMap and a Secret of its own and every tenth a ConfigMap
// shared by its namespace; changed of them have a change due, and one
// shared ConfigMap's change is halted by a failed rollout.
func scaleWorld(b *testing.B, workloads, changed int) *world {
	w := newWorld(b, "")
	for ns := 0; ns < 10; ns++ {
		w.source("configmap", fmt.Sprintf("scale-%d", ns), "shared", map[string]string{"v": "1"})
	}
	for i := 0; i < workloads; i++ {
		ns := fmt.Sprintf("scale-%d", i%10)
		cm := w.source("configmap", ns, fmt.Sprintf("cm-%05d", i), map[string]string{"a": "1", "b": "2"})
		secret := w.source("secret", ns, fmt.Sprintf("secret-%05d", i), map[string]string{"a": "1", "b": "2"})
		d := deployment{ns: ns, name: fmt.Sprintf("w-%05d", i), reads: []catalog.SourceID{cm, secret}}
		if i%10 == 0 {
			d.reads = append(d.reads, catalog.SourceID{Kind: "configmap", Namespace: ns, Name: "shared"})
		}
		if i < changed {
			d.applied = map[catalog.SourceID]string{cm: w.sum(cm, old)}
		}
		w.add(d)
	}
	return w
}

// Deciding 10,000 workloads from a listing: what status does once the
// list requests have returned (BENCHMARKS.md, "status").
func BenchmarkBuild10k(b *testing.B) {
	w := scaleWorld(b, 10000, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l := w.listing()
		b.StartTimer()
		rep := Build(l, "all namespaces", now)
		if rep.Workloads.OptedIn != 10000 {
			b.Fatalf("%d workloads decided", rep.Workloads.OptedIn)
		}
	}
}

// Reducing 10,000 workloads and 20,010 sources as their pages arrive, and
// deciding them.
func BenchmarkListAndBuild10k(b *testing.B) {
	w := scaleWorld(b, 10000, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep := Build(w.listing(), "all namespaces", now)
		if rep.Workloads.OptedIn != 10000 {
			b.Fatalf("%d workloads decided", rep.Workloads.OptedIn)
		}
	}
}
