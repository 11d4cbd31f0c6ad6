package restart

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/pacing"
	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// The restart strategies beyond a patch (config.Strategy): runNow creates a
// Job and then records it on the workload; recreate deletes the workload and
// creates it again with the record already on it.

// restartTime is the time a timestampAt strategy writes: RFC 3339 in
// seconds, as Argo Rollouts' spec.restartAt holds it (a metav1.Time). Its
// controller restarts the pods once the time has passed, so it is now, not
// later; but a time equal to or before the one already there would restart
// nothing, so two restarts within one second write the next second.
func restartTime(now time.Time, current string) string {
	t := now.UTC().Truncate(time.Second)
	if prev, err := time.Parse(time.RFC3339, current); err == nil && !t.After(prev) {
		t = prev.UTC().Truncate(time.Second).Add(time.Second)
	}
	return t.Format(time.RFC3339)
}

// instantiateAnnotation marks a Job started by hand from a CronJob, as
// `kubectl create job --from=cronjob/NAME` marks it.
const instantiateAnnotation = "cronjob.kubernetes.io/instantiate"

// jobNameFor names the Job a runNow restart starts after the change it
// delivers: the workload (its UID), the checksums it held and the time of
// its last restart (what it is restarted from), and the checksums it will
// hold (what to). A retry of the same restart (the record write failed, or
// the controller died between the two writes) computes the same name, gets
// AlreadyExists and goes on to record; the next change, even back to data
// seen before, comes from another record and gets another name.
func jobNameFor(w *catalog.WorkloadState, plan decision.Plan) string {
	to, _ := json.Marshal(plan.Applied) // sorted keys: stable
	var from string
	if prev, _ := pacing.ParseLastRestart(w.LastRestart); prev != nil {
		from = prev.At.UTC().Format(time.RFC3339Nano)
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{string(w.UID), w.Applied, from, string(to)}, "\x00")))
	// A Job's name is a label value (job-name): at most 63 characters.
	prefix := strings.TrimRight(w.Name[:min(len(w.Name), 52)], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:5])
}

// getWhole reads the whole workload the strategy acts on. The decision was
// made on the cache; an object changed since is decided again first.
func (c *Controller) getWhole(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState) (*unstructured.Unstructured, error) {
	obj, err := c.client.Resource(key.Resource).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if obj.GetResourceVersion() != w.ResourceVersion {
		return nil, fmt.Errorf("%s changed since it was cached: %w", key, errWorkloadBehind)
	}
	return obj, nil
}

// errWorkloadBehind retries a restart decided on a cached workload older
// than the one on the API server.
var errWorkloadBehind = fmt.Errorf("the cache is behind the workload")

// restartBy carries out a runNow or recreate restart, then reports it. The
// reservation of the fleet is released on every failure, as for a patch.
func (c *Controller) restartBy(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict) error {
	if c.fresh != nil && !c.fresh() {
		c.fleet.unreserve(key)
		return errLeaseStale
	}
	obj, err := c.getWhole(ctx, key, w)
	if err == nil {
		if v.Plan.Strategy.Name == config.RunNow {
			err = c.runNow(ctx, key, w, v, obj)
		} else {
			err = c.recreate(ctx, key, w, v, obj)
		}
	}
	if err != nil {
		c.fleet.unreserve(key)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restarting %s by %s: %w", key, v.Plan.Strategy.Name, err)
	}
	c.report(w, key, v.Plan, v.At, false)
	return nil
}

// runNow creates the Job, then records it with the checksums in one patch.
func (c *Controller) runNow(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict, obj *unstructured.Unstructured) error {
	job, err := JobFrom(obj, v.Plan.Strategy.JobTemplate, jobNameFor(w, v.Plan))
	if err != nil {
		return err
	}
	jobs := c.client.Resource(config.JobResource()).Namespace(key.Namespace)
	_, err = jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: "restart-controller"})
	if apierrors.IsAlreadyExists(err) {
		// Started by an earlier try of this very restart: record it. A Job
		// of that name owned by something else is not ours to count.
		existing, getErr := jobs.Get(ctx, job.GetName(), metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("reading Job %s: %w", job.GetName(), getErr)
		}
		if !ownedBy(existing, obj) {
			return fmt.Errorf("job %s exists and is not owned by %s", job.GetName(), key)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("creating Job %s: %w", job.GetName(), err)
	}
	plan := v.Plan
	if v.LastRestart != nil {
		rec := *v.LastRestart
		rec.Job = job.GetName()
		plan.Extra = withExtra(plan.Extra, c.cfg.Annotations.Rollout, pacing.Encode(&rec))
	}
	body, err := BuildPatch(nil, c.cfg.Annotations, w, plan, v.At)
	if err != nil {
		return err
	}
	start := time.Now()
	err = c.patch(ctx, key, body)
	c.metrics.PatchDuration.Observe(time.Since(start).Seconds())
	return err
}

func withExtra(extra map[string]interface{}, key string, value interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(extra)+1)
	for k, v := range extra {
		out[k] = v
	}
	out[key] = value
	return out
}

func ownedBy(obj, owner *unstructured.Unstructured) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// JobFrom builds the Job a runNow restart creates from the workload's Job
// template, as `kubectl create job --from=cronjob/NAME` does: the
// template's labels and annotations, the instantiate annotation, the
// workload as its controlling owner (its Jobs are garbage collected with
// it), and the template's spec.
func JobFrom(owner *unstructured.Unstructured, template refs.Path, name string) (*unstructured.Unstructured, error) {
	tmpl, ok := template.Object(owner.Object)
	if !ok {
		return nil, fmt.Errorf("%s/%s has no Job template", owner.GetNamespace(), owner.GetName())
	}
	tmpl = runtime.DeepCopyJSON(tmpl)
	spec, ok := tmpl["spec"].(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("%s/%s: its Job template has no spec", owner.GetNamespace(), owner.GetName())
	}
	meta, _ := tmpl["metadata"].(map[string]interface{})
	job := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "batch/v1", "kind": "Job", "spec": spec}}
	annotations := map[string]string{}
	if a, ok := meta["annotations"].(map[string]interface{}); ok {
		for k, v := range a {
			if s, ok := v.(string); ok {
				annotations[k] = s
			}
		}
	}
	annotations[instantiateAnnotation] = "manual"
	if l, ok := meta["labels"].(map[string]interface{}); ok {
		labels := map[string]string{}
		for k, v := range l {
			if s, ok := v.(string); ok {
				labels[k] = s
			}
		}
		job.SetLabels(labels)
	}
	job.SetName(name)
	job.SetNamespace(owner.GetNamespace())
	job.SetAnnotations(annotations)
	yes := true
	job.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(),
		Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	return job, nil
}

// recreate deletes the workload, only as it was decided on (its UID and
// resourceVersion as preconditions), and creates it again with the record
// of this restart on it: one write carries the checksums, as a patch would.
// Between the two writes the object exists only in this process; that is
// why recreate is never a default.
func (c *Controller) recreate(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict, obj *unstructured.Unstructured) error {
	fresh, err := c.recreated(key, w, v, obj)
	if err != nil {
		return err
	}
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	background := metav1.DeletePropagationBackground
	res := c.client.Resource(key.Resource).Namespace(key.Namespace)
	if err := res.Delete(ctx, key.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: &background}); err != nil {
		return fmt.Errorf("deleting: %w", err)
	}
	// The deletion may take a moment to complete; the object must come back.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, recreateTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := res.Create(ctx, fresh, metav1.CreateOptions{FieldManager: "restart-controller"})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsAlreadyExists(err):
			return false, nil
		}
		return false, fmt.Errorf("creating again: %w", err)
	})
}

// recreateTimeout bounds how long the old object may take to go.
const recreateTimeout = 30 * time.Second

// recreated is the object recreate creates: obj without its status, its
// server-set metadata and the strategy's cleared fields and template
// labels, with the plan's annotations.
func (c *Controller) recreated(key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	fresh := obj.DeepCopy()
	delete(fresh.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
		"deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(fresh.Object, "metadata", f)
	}
	s := v.Plan.Strategy
	for _, p := range s.ClearFields {
		if fields, ok := p.Fields(); ok {
			unstructured.RemoveNestedField(fresh.Object, fields...)
		}
	}
	if len(s.ClearTemplateLabels) > 0 {
		labels := append(append([]string{}, c.templateFields[key.Resource]...), "metadata", "labels")
		for _, l := range s.ClearTemplateLabels {
			unstructured.RemoveNestedField(fresh.Object, append(labels, l)...)
		}
	}
	body, err := BuildPatch(nil, c.cfg.Annotations, w, v.Plan, v.At)
	if err != nil {
		return nil, err
	}
	var patch struct {
		Metadata struct {
			Annotations map[string]interface{} `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &patch); err != nil {
		return nil, fmt.Errorf("reading the record: %w", err)
	}
	annotations := fresh.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k, val := range patch.Metadata.Annotations {
		if s, ok := val.(string); ok {
			annotations[k] = s
		} else {
			delete(annotations, k)
		}
	}
	// The new object has another UID: the template record of the old one
	// would name a write of an object that no longer exists.
	annotations[c.cfg.Annotations.AppliedTemplateHash] = decision.RecordedTemplateHash(annotations[c.cfg.Annotations.AppliedTemplateHash])
	fresh.SetAnnotations(annotations)
	return fresh, nil
}

// restartStatus is the status that ends the rollout of rec: for a runNow
// restart the Job's, read from the API server (Jobs are not watched), with
// how soon to look again while it runs; else the workload's.
func (c *Controller) restartStatus(ctx context.Context, key catalog.WorkloadKey, rec *pacing.LastRestart, status rollout.Status) (rollout.Status, time.Duration) {
	if rec == nil || rec.Job == "" {
		return status, 0
	}
	job, err := c.client.Resource(config.JobResource()).Namespace(key.Namespace).Get(ctx, rec.Job, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return rollout.Status{Phase: rollout.NotRolling, Reason: "JobGone", Message: "the Job " + rec.Job + " was deleted"}, 0
	case err != nil:
		return rollout.Status{Phase: rollout.Progressing, Reason: "JobUnreadable", Message: err.Error()}, jobPoll
	}
	return rollout.Rule{Kind: rollout.KindJob}.Evaluate(job.Object), jobPoll
}

// jobPoll is how often a running Job is read while its rollout is followed:
// its changes bring no event for the workload.
const jobPoll = 5 * time.Second
