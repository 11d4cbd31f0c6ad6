package restart

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/strategy"
)

// restartBy carries out a runNow or recreate restart (internal/strategy),
// then reports it. The fleet's reservation is released on every failure,
// as for a patch.
func (c *Controller) restartBy(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict) error {
	wr := strategy.Writer{Client: c.client, Annotations: c.cfg.Annotations, Patch: c.timedPatch, TemplateFields: c.templateFields[key.Resource]}
	err := errLeaseStale
	if c.fresh == nil || c.fresh() {
		err = wr.Restart(ctx, key, w, v)
	}
	if err != nil {
		c.fleet.unreserve(key)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("restarting %s by %s: %w", key, v.Plan.Strategy.Name, err)
	}
	c.report(w, key, v.Plan, v.At, false)
	return nil
}

// timedPatch is patch, timed as every write to a workload is.
func (c *Controller) timedPatch(ctx context.Context, key catalog.WorkloadKey, body []byte) error {
	start := time.Now()
	err := c.patch(ctx, key, body)
	c.metrics.PatchDuration.Observe(time.Since(start).Seconds())
	return err
}
