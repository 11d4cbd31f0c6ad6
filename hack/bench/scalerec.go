package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// scaleRecorder is the benchmark's own watch of the scale scenario's
// workloads (every kind, every namespace): per workload, when its pod
// template's restart timestamp changed, and when its applied-checksums
// annotation first appeared. Objects are reduced to those two annotations.
type scaleRecorder struct {
	writeLog                        // its mu guards restarts too
	restarts map[string][]time.Time // "resource/ns/name"
}

const recTemplateTS = "bench/template-timestamp" // where the reduced object keeps the pod template's timestamp

func startScaleRecorder(ctx context.Context, cs kubernetes.Interface) (*scaleRecorder, error) {
	r := &scaleRecorder{restarts: map[string][]time.Time{}, writeLog: writeLog{firstRecord: map[string]time.Time{}}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = scaleLabel + "=" + scaleLabelValue }),
		informers.WithTransform(reduceForRecorder))
	infs := map[string]cache.SharedIndexInformer{
		"deployments":  factory.Apps().V1().Deployments().Informer(),
		"statefulsets": factory.Apps().V1().StatefulSets().Informer(),
		"daemonsets":   factory.Apps().V1().DaemonSets().Informer(),
	}
	var synced []cache.InformerSynced
	for resource, inf := range infs {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { r.observe(resource, nil, obj, time.Now()) },
			UpdateFunc: func(oldObj, newObj any) {
				r.observe(resource, oldObj, newObj, time.Now())
			},
		}); err != nil {
			return nil, err
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("bench: workload watch did not sync")
	}
	return r, nil
}

// reduceForRecorder keeps name, namespace and the two annotations read.
func reduceForRecorder(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	ann := map[string]string{}
	if v, ok := m.GetAnnotations()[appliedAnnotation]; ok {
		ann[appliedAnnotation] = v
	}
	ann[recTemplateTS] = templateAnnotations(obj)[restartAnnotation]
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion(), Annotations: ann,
	}}, nil
}

// templateAnnotations are the pod template's annotations of a workload.
func templateAnnotations(obj any) map[string]string {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Spec.Template.Annotations
	case *appsv1.StatefulSet:
		return o.Spec.Template.Annotations
	case *appsv1.DaemonSet:
		return o.Spec.Template.Annotations
	}
	return nil
}

func (r *scaleRecorder) observe(resource string, oldObj, newObj any, now time.Time) {
	n, ok := newObj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	key := resource + "/" + n.Namespace + "/" + n.Name
	applied, hasApplied := n.Annotations[appliedAnnotation]
	r.mu.Lock()
	defer r.mu.Unlock()
	if hasApplied {
		if _, seen := r.firstRecord[key]; !seen {
			r.firstRecord[key] = now
		}
	}
	o, ok := oldObj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	if o.Annotations[appliedAnnotation] != applied {
		r.lastWrite = now
	}
	if o.Annotations[recTemplateTS] != n.Annotations[recTemplateTS] {
		r.lastWrite = now
		r.restarts[key] = append(r.restarts[key], now)
	}
}

// firstRestartAfter is when the first restart of key at or after t was
// seen.
func (r *scaleRecorder) firstRestartAfter(key string, t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, seen := range r.restarts[key] {
		if !seen.Before(t) {
			return seen, true
		}
	}
	return time.Time{}, false
}

// restartsBetween counts restarts in [from, to) per workload.
func (r *scaleRecorder) restartsBetween(from, to time.Time) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for key, evs := range r.restarts {
		for _, t := range evs {
			if !t.Before(from) && t.Before(to) {
				out[key]++
			}
		}
	}
	return out
}
