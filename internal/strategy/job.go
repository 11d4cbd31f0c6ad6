package strategy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// instantiateAnnotation marks a Job started by hand from a CronJob, as
// `kubectl create job --from=cronjob/NAME` marks it.
const instantiateAnnotation = "cronjob.kubernetes.io/instantiate"

// JobName names the Job a runNow restart starts after the change it
// delivers: the workload (its UID), the checksums it held and the time of
// its last restart (what it is restarted from), and the checksums it will
// hold (what to). A retry of the same restart (the record write failed, or
// the controller died between the two writes) computes the same name, gets
// AlreadyExists and goes on to record; the next change, even back to data
// seen before, comes from another record and gets another name.
func JobName(w decision.Workload, plan decision.Plan) string {
	to := record.EncodeApplied(plan.Applied) // sorted keys: stable
	var from string
	if prev := w.LastRestart; prev != nil {
		from = prev.At.UTC().Format(time.RFC3339Nano)
	}
	ws := w.State
	sum := sha256.Sum256([]byte(strings.Join([]string{string(ws.UID), ws.Applied, from, to}, "\x00")))
	// A Job's name is a label value (job-name): at most 63 characters.
	prefix := strings.TrimRight(ws.Name[:min(len(ws.Name), 52)], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:5])
}

// runNow creates the Job, then records it with the checksums in one patch.
func (wr Writer) runNow(ctx context.Context, key catalog.WorkloadKey, w decision.Workload, v decision.Verdict, obj *unstructured.Unstructured) error {
	job, err := JobFrom(obj, v.Plan.Strategy.JobTemplate, JobName(w, v.Plan))
	if err != nil {
		return err
	}
	jobs := wr.Client.Resource(config.JobResource()).Namespace(key.Namespace)
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
		plan.Extra = make(map[string]interface{}, len(v.Plan.Extra)+1)
		maps.Copy(plan.Extra, v.Plan.Extra)
		plan.Extra[wr.Annotations.Rollout] = record.Encode(&rec)
	}
	body, err := BuildPatch(nil, wr.Annotations, w.State, plan, v.At)
	if err != nil {
		return err
	}
	return wr.Patch(ctx, key, body)
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
	annotations := stringMap(meta["annotations"])
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[instantiateAnnotation] = "manual"
	if labels := stringMap(meta["labels"]); labels != nil {
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

// stringMap reads a map of strings of unstructured data; nil if it is none.
func stringMap(v interface{}) map[string]string {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, val := range m {
		if s, ok := val.(string); ok {
			out[k] = s
		}
	}
	return out
}

// JobPoll is how often a running Job is read while its rollout is
// followed: its changes bring no event for the workload.
const JobPoll = 5 * time.Second

// JobStatus is the status of the Job a runNow restart started, read from
// the API server (Jobs are not watched), with how soon to read it again
// while it runs.
func JobStatus(ctx context.Context, client dynamic.Interface, namespace, name string) (rollout.Status, time.Duration) {
	job, err := client.Resource(config.JobResource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return rollout.Status{Phase: rollout.NotRolling, Reason: "JobGone", Message: "the Job " + name + " was deleted"}, 0
	case err != nil:
		return rollout.Status{Phase: rollout.Progressing, Reason: "JobUnreadable", Message: err.Error()}, JobPoll
	}
	return rollout.Rule{Kind: rollout.KindJob}.Evaluate(job.Object), JobPoll
}
