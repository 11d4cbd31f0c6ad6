package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// zeroTarget is the workload a mapped source's update patches.
type zeroTarget struct {
	resource  string // deployments, statefulsets, daemonsets (apps/v1)
	namespace string
	name      string
}

// zeroLogic is the zero-logic patcher (floor.go): the physical limit of
// "source updated → pod template patched" on this machine, with the
// controller's client settings and the same watch of every source.
type zeroLogic struct {
	readers map[string]zeroTarget // "KIND/NS/NAME" → reader
	client  dynamic.Interface
	queue   workqueue.TypedInterface[zeroTarget]

	// What the benchmark reads beside the controller's figures: how long
	// a target waited in the queue for a worker, and how long its PATCH
	// took, seen from the client (zerologic_*_seconds_sum and _count on
	// --metrics-address).
	mu                sync.Mutex
	queued            map[zeroTarget]time.Time
	waitSum, patchSum float64
	waitN, patchN     float64
}

func runZeroLogic(ctx context.Context, rc *rest.Config, h helperOptions, began time.Time) error {
	z := &zeroLogic{readers: map[string]zeroTarget{}, queue: workqueue.NewTyped[zeroTarget](), queued: map[zeroTarget]time.Time{}}
	if err := z.readMap(h.mapFile); err != nil {
		return err
	}
	var err error
	if z.client, err = dynamic.NewForConfig(rc); err != nil {
		return err
	}
	synced, err := sourceInformers(ctx, rc, z)
	if err != nil {
		return err
	}
	for range h.workers {
		go z.work(ctx)
	}
	if h.metricsAddr != "" {
		go z.serveMetrics(ctx, h.metricsAddr)
	}
	go func() {
		<-ctx.Done()
		z.queue.ShutDown()
	}()
	return reportReady(ctx, began, synced)
}

// readMap reads lines "KIND NS NAME RESOURCE NS NAME".
func (z *zeroLogic) readMap(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) != 6 {
			continue
		}
		z.readers[fl[0]+"/"+fl[1]+"/"+fl[2]] = zeroTarget{resource: fl[3], namespace: fl[4], name: fl[5]}
	}
	return sc.Err()
}

// OnUpdate queues the reader of a mapped source on any update of it: no
// comparison of data, no catalog, no decision.
func (z *zeroLogic) OnUpdate(kind, newObj interface{}) {
	m, ok := newObj.(metav1.Object)
	if !ok {
		return
	}
	if t, ok := z.readers[kind.(string)+"/"+m.GetNamespace()+"/"+m.GetName()]; ok {
		z.mu.Lock()
		if _, waiting := z.queued[t]; !waiting {
			z.queued[t] = time.Now()
		}
		z.mu.Unlock()
		z.queue.Add(t)
	}
}
func (z *zeroLogic) OnAdd(interface{}, bool) {}
func (z *zeroLogic) OnDelete(interface{})    {}

// work patches the pod-template timestamp, as the controller's restart
// patch does (a JSON merge patch through the dynamic client).
func (z *zeroLogic) work(ctx context.Context) {
	for {
		t, shutdown := z.queue.Get()
		if shutdown {
			return
		}
		took := time.Now()
		z.mu.Lock()
		if at, ok := z.queued[t]; ok {
			z.waitSum, z.waitN = z.waitSum+took.Sub(at).Seconds(), z.waitN+1
			delete(z.queued, t)
		}
		z.mu.Unlock()
		body, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{restartAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}}}}})
		gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: t.resource}
		if _, err := z.client.Resource(gvr).Namespace(t.namespace).Patch(ctx, t.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "zero-logic"}); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "patch %v: %v\n", t, err)
		}
		z.mu.Lock()
		z.patchSum, z.patchN = z.patchSum+time.Since(took).Seconds(), z.patchN+1
		z.mu.Unlock()
		z.queue.Done(t)
	}
}

// serveMetrics serves the patcher's two figures in Prometheus text, and its
// execution trace (--trace-fanout), as the controller's metrics port does.
func (z *zeroLogic) serveMetrics(ctx context.Context, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		z.mu.Lock()
		defer z.mu.Unlock()
		fmt.Fprintf(w, "zerologic_queue_wait_seconds_sum %g\nzerologic_queue_wait_seconds_count %g\n", z.waitSum, z.waitN)
		fmt.Fprintf(w, "zerologic_patch_duration_seconds_sum %g\nzerologic_patch_duration_seconds_count %g\n", z.patchSum, z.patchN)
	})
	srv := &http.Server{Addr: addr, Handler: mux}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "metrics: %v\n", err)
	}
}
