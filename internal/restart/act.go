package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/strategy"
)

// act carries out the verdict: the one write it asks for (the outcome of a
// rollout, a hold, the removal of a hold, or the patch of a record or a
// restart by its strategy), and what this process keeps of it in memory.
// It reports whether it wrote (a hold already there is not written again).
// A workload gone meanwhile is not an error: nothing was refused.
func (c *Controller) act(ctx context.Context, s decision.Snapshot, v decision.Verdict) (wrote bool, err error) {
	key, w := s.Key, s.Workload.State
	switch v.Action {
	case decision.EndRollout:
		wrote, err = c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.Config.Annotations.Rollout: record.Encode(v.Ended.Record)})
		if wrote {
			// Until the cache shows the result, wave decisions see it here.
			c.Pacing.Reserve(key, v.Ended.Record, s.Now)
		}
	case decision.Hold:
		if !s.Workload.Hold.Same(v.Hold) {
			wrote, err = c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.Config.Annotations.Hold: record.Encode(v.Hold)})
		}
	case decision.Queue, decision.Wait:
		if v.Unhold && w.Hold != "" {
			wrote, err = c.patchAnnotations(ctx, key, w.ResourceVersion, map[string]interface{}{c.Config.Annotations.Hold: nil})
		}
	case decision.Restart, decision.Record:
		wrote, err = c.write(ctx, s, v)
	}
	if err != nil {
		return false, err
	}
	c.remember(s, v)
	if e := v.Ended; e != nil && (e.Written && wrote || !e.Written && c.Pacing.AnyWaiting(e.Record.Sources)) {
		// A change the rollout delivered may have become paced since (more
		// of its readers became due) and counted it in flight: the readers
		// waiting for that wave are woken, or they would wait for their
		// recheck. For an end that is not written only when one waits: a
		// fan-out of unpaced changes has nobody to wake, and would evaluate
		// the waves of every source at every end.
		c.wake(e.Record.Sources, s.Now)
	}
	return wrote, nil
}

// remember keeps in memory what the verdict says of the workload: which
// rollouts this process follows, and nothing at all of one gone or not
// opted in.
func (c *Controller) remember(s decision.Snapshot, v decision.Verdict) {
	key := s.Key
	if v.Gate == decision.GateOptIn {
		c.dryRun.forget(key)
		c.Pacing.Forget(key)
		c.standing.set(key, "", "", c.Metrics.SetStanding)
	}
	c.followed.note(key, v.Follow)
}

// write writes a record or a restart: in a dry run only in memory; by the
// restart's strategy where it writes more than the patch; otherwise the one
// merge patch. The reservation of the restart's record is dropped if it
// fails.
func (c *Controller) write(ctx context.Context, s decision.Snapshot, v decision.Verdict) (bool, error) {
	key, w := s.Key, s.Workload.State
	if c.Config.Settings.DryRun {
		c.dryRun.remember(key, v.Plan)
		return true, nil
	}
	var err error
	if strategy.OtherWrites(v.Plan) {
		err = errLeaseStale
		if c.Fresh() {
			wr := strategy.Writer{Client: c.Client, Annotations: c.Config.Annotations, Patch: c.send,
				TemplateFields: c.templateFields[key.Resource], Sources: c.Config.Sources, Extractors: c.Config.Extractors}
			err = wr.Restart(ctx, key, s.Workload, v)
		}
	} else {
		var body []byte
		if body, err = strategy.BuildPatch(c.templateFields[key.Resource], c.Config.Annotations, w, v.Plan, v.At); err != nil {
			c.Pacing.Unreserve(key)
			return false, fmt.Errorf("building patch for %s: %w", key, err)
		}
		err = c.send(ctx, key, body)
	}
	if strategy.PatchesWorkload(v.Plan) && !errors.Is(err, errLeaseStale) && !apierrors.IsNotFound(err) {
		c.Metrics.RestartPatched(key.Namespace, err == nil)
	}
	if err != nil {
		c.Pacing.Unreserve(key)
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, nil // gone: no restart was refused
	case err != nil && strategy.OtherWrites(v.Plan):
		return false, fmt.Errorf("restarting %s by %s: %w", key, v.Plan.Strategy.Name, err)
	case err != nil:
		return false, fmt.Errorf("patching %s: %w", key, err)
	}
	return true, nil
}

// patchAnnotations writes annotations (nil removes one) on the workload as
// cached at resourceVersion rv: a conflict means the cache is behind, and
// the workload is decided again on fresh state. It reports whether it
// wrote: not when the workload is gone.
func (c *Controller) patchAnnotations(ctx context.Context, key catalog.WorkloadKey, rv string, annotations map[string]interface{}) (bool, error) {
	body, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"resourceVersion": rv, "annotations": annotations},
	})
	if err != nil {
		return false, fmt.Errorf("encoding patch: %w", err)
	}
	switch err := c.send(ctx, key, body); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("patching %s: %w", key, err)
	}
	return true, nil
}

// send sends a merge patch by Patch through the write fence, timed as
// every write to a workload is.
func (c *Controller) send(ctx context.Context, key catalog.WorkloadKey, body []byte) error {
	if !c.Fresh() {
		return errLeaseStale
	}
	start := time.Now()
	err := c.Patch(ctx, key, body)
	c.Metrics.PatchDuration.Observe(time.Since(start).Seconds())
	return err
}

// metadataAnswer asks the API server to answer a PATCH with the
// workload's metadata alone, in protobuf: the smallest answer it can
// encode and send (client-go's metadata client asks the same).
const metadataAnswer = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// APIPatch sends merge patches with a REST client made as client-go's
// metadata client is, and reads nothing of a success but its status: the
// controller never uses the object a PATCH returns. Decoding it took 0.33
// of the controller's 2.97 CPU-s in a burst of 1,000 restarts at 10,000
// workloads, when restarts took the whole object back as JSON
// (BENCHMARKS.md). A failure is decoded as client-go decodes it
// (apierrors.IsNotFound and IsConflict hold).
func APIPatch(rc *rest.Config) (PatchFunc, error) {
	pc := metadata.ConfigFor(rc)
	// Only for encoding options: every request has an absolute path.
	pc.GroupVersion, pc.APIPath = &schema.GroupVersion{}, "/"
	client, err := rest.RESTClientFor(pc)
	if err != nil {
		return nil, fmt.Errorf("creating the patch client: %w", err)
	}
	return func(ctx context.Context, key catalog.WorkloadKey, body []byte) error {
		return client.Patch(types.MergePatchType).AbsPath(resourcePath(key)...).
			Param("fieldManager", fieldManager).SetHeader("Accept", metadataAnswer).
			Body(body).Do(ctx).Error()
	}, nil
}

// fieldManager is the controller's name in the workloads' managedFields.
const fieldManager = "restart-controller"

// resourcePath is the API path of a workload: /api/v1 for the core group,
// /apis/GROUP/VERSION for the others.
func resourcePath(key catalog.WorkloadKey) []string {
	gvr := key.Resource
	path := []string{"/apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		path = []string{"/api", gvr.Version}
	}
	if key.Namespace != "" {
		path = append(path, "namespaces", key.Namespace)
	}
	return append(path, gvr.Resource, key.Name)
}

// wake enqueues, for each source a rollout that ended had delivered, the
// readers that may move now (pacing.State.Movable).
func (c *Controller) wake(sources map[string]string, now time.Time) {
	for _, key := range c.Pacing.Movable(sources, now) {
		c.queue.Add(key)
	}
}
