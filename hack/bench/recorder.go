package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// restartEvent is one change of a workload's pod-template timestamp, as the
// benchmark's own watch saw it.
type restartEvent struct {
	seen    time.Time
	applied string // the applied-checksums annotation after the restart
}

// recorder is the benchmark's own watch of every workload a scenario
// created (label restart-bench, every kind, every namespace): per workload,
// every restart (pod-template timestamp change) and when its
// applied-checksums annotation first appeared. Objects are reduced to those
// two annotations.
type recorder struct {
	stores map[string]cache.Store // per resource

	mu          sync.Mutex
	restarts    map[string][]restartEvent // workloadRef.key()
	firstRecord map[string]time.Time      // first sight of the applied-checksums annotation
	lastWrite   time.Time                 // last change of an annotation a program writes
}

const recTemplateTS = "bench/template-timestamp" // where the reduced object keeps the pod template's timestamp

func startRecorder(ctx context.Context, cs kubernetes.Interface) (*recorder, error) {
	r := &recorder{stores: map[string]cache.Store{}, restarts: map[string][]restartEvent{}, firstRecord: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchLabel }),
		informers.WithTransform(reduceForRecorder))
	infs := map[string]cache.SharedIndexInformer{
		"deployments":  factory.Apps().V1().Deployments().Informer(),
		"statefulsets": factory.Apps().V1().StatefulSets().Informer(),
		"daemonsets":   factory.Apps().V1().DaemonSets().Informer(),
	}
	var synced []cache.InformerSynced
	for resource, inf := range infs {
		r.stores[resource] = inf.GetStore()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.observe(resource, nil, obj, time.Now()) },
			UpdateFunc: func(oldObj, newObj any) { r.observe(resource, oldObj, newObj, time.Now()) },
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

func (r *recorder) observe(resource string, oldObj, newObj any, now time.Time) {
	n, ok := newObj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	key := workloadRef{resource, n.Namespace, n.Name}.key()
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
		r.restarts[key] = append(r.restarts[key], restartEvent{seen: now, applied: applied})
	}
}

func parseApplied(s string) map[string]string {
	m := map[string]string{}
	_ = json.Unmarshal([]byte(s), &m)
	return m
}

// applied returns the current applied-checksums annotation of a workload.
func (r *recorder) applied(w workloadRef) map[string]string {
	obj, ok, _ := r.stores[w.resource].GetByKey(w.ns + "/" + w.name)
	if !ok {
		return map[string]string{}
	}
	return parseApplied(obj.(*metav1.PartialObjectMetadata).Annotations[appliedAnnotation])
}

// recorded returns how many workloads carry the applied-checksums
// annotation and when the last of them got it.
func (r *recorder) recorded() (n int, last time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.firstRecord {
		n++
		if t.After(last) {
			last = t
		}
	}
	return n, last
}

func (r *recorder) lastWriteSeen() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastWrite
}

// restartsBetween counts restarts per workload seen in [from, to).
func (r *recorder) restartsBetween(from, to time.Time) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for key, evs := range r.restarts {
		for _, e := range evs {
			if !e.seen.Before(from) && e.seen.Before(to) {
				out[key]++
			}
		}
	}
	return out
}

// carried returns when the restart that carries a change was first seen: a
// restart of the reader seen at or after the update was issued, and, when
// before is not empty (a program that records applied checksums), whose
// applied checksum for the source differs from before. The second rule is
// exact even when a workload restarts twice for two sources; the zero-logic
// patcher records nothing, so for it the first restart counts.
func (r *recorder) carried(key, id, before string, issued time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.restarts[key] {
		if e.seen.Before(issued) {
			continue
		}
		if before == "" {
			return e.seen, true
		}
		if v, ok := parseApplied(e.applied)[id]; ok && v != before {
			return e.seen, true
		}
	}
	return time.Time{}, false
}
