// Package strategy carries out the restarts that are more than the one
// merge patch of a pod template's annotation (config.Strategy): the time a
// timestampAt strategy writes, the Job a runNow restart starts and follows,
// the object a recreate restart deletes and creates again, and the
// containers' variables an envVar restart sets. The
// controller (internal/restart) decides and lends its client and its patch;
// this package only writes as the strategy says.
package strategy

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/refs"
)

// Time is the time a timestampAt strategy writes: RFC 3339 in seconds, as
// Argo Rollouts' spec.restartAt holds it (a metav1.Time). Its controller
// restarts the pods once the time has passed, so it is now, not later; but
// a time equal to or before the one already there would restart nothing,
// so two restarts within one second write the next second.
func Time(now time.Time, current string) string {
	t := now.UTC().Truncate(time.Second)
	if prev, err := time.Parse(time.RFC3339, current); err == nil && !t.After(prev) {
		t = prev.UTC().Truncate(time.Second).Add(time.Second)
	}
	return t.Format(time.RFC3339)
}

// OtherWrites reports whether a plan's restart is written otherwise than
// by the one merge patch of the workload BuildPatch makes: from the whole
// workload, read just before (runNow, recreate, envVar).
func OtherWrites(plan decision.Plan) bool {
	switch plan.Strategy.Name {
	case config.RunNow, config.Recreate, config.EnvVar:
		return plan.Restart
	}
	return false
}

// PatchesWorkload reports whether a plan's restart is one patch of the
// workload (every strategy but runNow and recreate): what Reloader's reload
// counter counts.
func PatchesWorkload(plan decision.Plan) bool {
	return plan.Restart && plan.Strategy.Name != config.RunNow && plan.Strategy.Name != config.Recreate
}

// Writer is what the controller lends to carry out a restart.
type Writer struct {
	Client      dynamic.Interface
	Annotations config.Annotations
	// Patch sends a merge patch to the workload, as every other write of
	// the controller (the lease check, the field manager, the metrics).
	Patch func(ctx context.Context, key catalog.WorkloadKey, body []byte) error
	// TemplateFields lead to the pod template of the workload's kind.
	TemplateFields []string
	// Sources and Extractors are the config's source kinds and reference
	// extractors: the envVar strategy names its variables after the first
	// and finds the containers that read a source with the second.
	Sources    []config.SourceKind
	Extractors []*refs.Extractor
}

// errWorkloadBehind: the restart was decided on a cached workload older
// than the API server's. It is a conflict, as a patch on a stale
// resourceVersion is, and the workload is decided again on fresh state.
var errWorkloadBehind = errors.New("changed since it was cached")

// Restart carries out a runNow, recreate or envVar restart of the workload
// as the verdict decided it. NotFound is returned as it is: the workload is
// gone.
func (wr Writer) Restart(ctx context.Context, key catalog.WorkloadKey, w decision.Workload, v decision.Verdict) error {
	obj, err := wr.Client.Resource(key.Resource).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if obj.GetResourceVersion() != w.State.ResourceVersion {
		return apierrors.NewConflict(key.Resource.GroupResource(), key.Name, errWorkloadBehind)
	}
	switch v.Plan.Strategy.Name {
	case config.RunNow:
		return wr.runNow(ctx, key, w, v, obj)
	case config.EnvVar:
		return wr.envVar(ctx, key, w, v, obj)
	}
	return wr.recreate(ctx, key, w.State, v, obj)
}

func ownedBy(obj, owner *unstructured.Unstructured) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}
