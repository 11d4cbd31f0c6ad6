package restart

import (
	"context"
	"testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// BenchmarkReconcile is the controller's own cost of one reconcile, the
// API aside (the patch goes nowhere): a workload whose pods read what they
// started with, and one whose read key changed, restarted (unpaced) at each
// iteration. It measures what a change of the decision's path costs per
// reconcile, the way BENCHMARKS.md measures the whole.
func BenchmarkReconcile(b *testing.B) {
	for _, tc := range []struct {
		name string
		data map[string]string
	}{{"up to date", dataV1}, {"restart", dataV2}} {
		b.Run(tc.name, func(b *testing.B) {
			u := fromYAML(b, webDeployment)
			base := newHarness(b, nil, nil, nil)
			settled := settle(base, u, dataV1)
			h := newHarness(b, nil, nil, tc.data)
			h.cache(settled)
			nop := func(context.Context, catalog.WorkloadKey, []byte) error { return nil }
			h.c.Patch = nop
			key := keyOf(deploymentsGVR, settled)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := h.c.Reconcile(ctx, key); err != nil {
					b.Fatal(err)
				}
				h.c.Pacing.Unreserve(key) // the write went nowhere: decide it again
			}
		})
	}
}
