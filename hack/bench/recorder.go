package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// restartEvent is one change of a Deployment's pod-template timestamp, as the
// benchmark's own watch saw it.
type restartEvent struct {
	seen    time.Time
	applied map[string]string // the applied-checksums annotation after the restart
}

// recorder watches the Deployments and records, per Deployment, every
// restart (pod-template timestamp change) and when the applied-checksums
// annotation first appeared.
type recorder struct {
	store cache.Store

	writeLog // its mu guards restarts too
	restarts map[string][]restartEvent
}

// writeLog is what both recorders (the scenario's and the scale step's)
// keep of the controller's annotation writes.
type writeLog struct {
	mu          sync.Mutex
	firstRecord map[string]time.Time // first sight of the applied-checksums annotation
	lastWrite   time.Time            // last change of an annotation the controller writes
}

func startRecorder(ctx context.Context, cs kubernetes.Interface) (*recorder, error) {
	r := &recorder{restarts: map[string][]restartEvent{}, writeLog: writeLog{firstRecord: map[string]time.Time{}}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := factory.Apps().V1().Deployments().Informer()
	r.store = inf.GetStore()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				r.observe(nil, d, time.Now())
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*appsv1.Deployment)
			n, ok2 := newObj.(*appsv1.Deployment)
			if ok1 && ok2 {
				r.observe(o, n, time.Now())
			}
		},
	})
	if err != nil {
		return nil, err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("bench: deployment watch did not sync")
	}
	return r, nil
}

func (r *recorder) observe(old, d *appsv1.Deployment, now time.Time) {
	applied, hasApplied := d.Annotations[appliedAnnotation]
	ts := d.Spec.Template.Annotations[restartAnnotation]
	r.mu.Lock()
	defer r.mu.Unlock()
	if hasApplied {
		if _, seen := r.firstRecord[d.Name]; !seen {
			r.firstRecord[d.Name] = now
		}
	}
	if old == nil {
		return
	}
	if old.Annotations[appliedAnnotation] != applied {
		r.lastWrite = now
	}
	if old.Spec.Template.Annotations[restartAnnotation] != ts {
		r.lastWrite = now
		r.restarts[d.Name] = append(r.restarts[d.Name], restartEvent{seen: now, applied: parseApplied(applied)})
	}
}

func parseApplied(s string) map[string]string {
	m := map[string]string{}
	_ = json.Unmarshal([]byte(s), &m)
	return m
}

// applied returns the current applied-checksums annotation of a Deployment.
func (r *recorder) applied(dep string) map[string]string {
	obj, ok, _ := r.store.GetByKey(namespace + "/" + dep)
	if !ok {
		return map[string]string{}
	}
	return parseApplied(obj.(*appsv1.Deployment).Annotations[appliedAnnotation])
}

// recorded returns how many workloads carry the applied-checksums
// annotation and when the last of them got it.
func (r *writeLog) recorded() (n int, last time.Time) {
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

func (r *writeLog) lastWriteSeen() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastWrite
}

// restartsBetween counts restarts per Deployment seen in [from, to).
func (r *recorder) restartsBetween(from, to time.Time) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for name, evs := range r.restarts {
		for _, e := range evs {
			if !e.seen.Before(from) && e.seen.Before(to) {
				out[name]++
			}
		}
	}
	return out
}

// carried returns when the first restart of the Deployment that carries the
// change was seen: a restart seen after the update was issued whose applied
// checksum for the config differs from the one before the change. It is
// exact even when a Deployment restarts twice for two configs.
func (r *recorder) carried(dep, id, before string, issued time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.restarts[dep] {
		if e.seen.Before(issued) {
			continue
		}
		if v, ok := e.applied[id]; ok && v != before {
			return e.seen, true
		}
	}
	return time.Time{}, false
}
