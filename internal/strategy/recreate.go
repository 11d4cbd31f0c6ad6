package strategy

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
)

// recreateTimeout bounds how long the old object may take to go.
const recreateTimeout = 30 * time.Second

// recreate deletes the workload, only as it was decided on (its UID and
// resourceVersion as preconditions), and creates it again with the record
// of this restart on it: one write carries the checksums, as a patch would.
// Between the two writes the object exists only in this process; that is
// why recreate is never a default.
func (wr Writer) recreate(ctx context.Context, key catalog.WorkloadKey, w *catalog.WorkloadState, v decision.Verdict, obj *unstructured.Unstructured) error {
	fresh := wr.recreated(obj, v.Plan, recordAnnotations(wr.Annotations, w, v.Plan))
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	background := metav1.DeletePropagationBackground
	res := wr.Client.Resource(key.Resource).Namespace(key.Namespace)
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

// recreated is the object recreate creates: obj without its status, its
// server-set metadata and the strategy's cleared fields and template
// labels, with the plan's annotations (nil removes one).
func (wr Writer) recreated(obj *unstructured.Unstructured, plan decision.Plan, set map[string]interface{}) *unstructured.Unstructured {
	fresh := obj.DeepCopy()
	delete(fresh.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
		"deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(fresh.Object, "metadata", f)
	}
	s := plan.Strategy
	for _, p := range s.ClearFields {
		if fields, ok := p.Fields(); ok {
			unstructured.RemoveNestedField(fresh.Object, fields...)
		}
	}
	labels := append(append([]string{}, wr.TemplateFields...), "metadata", "labels")
	for _, l := range s.ClearTemplateLabels {
		unstructured.RemoveNestedField(fresh.Object, append(labels, l)...)
	}
	annotations := fresh.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k, val := range set {
		if s, ok := val.(string); ok {
			annotations[k] = s
		} else {
			delete(annotations, k)
		}
	}
	// The new object has another UID: the template record of the old one
	// would name a write of an object that no longer exists.
	key := wr.Annotations.AppliedTemplateHash
	annotations[key] = record.ParseTemplate(annotations[key]).Hash
	fresh.SetAnnotations(annotations)
	return fresh
}
