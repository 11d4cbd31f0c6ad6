package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Beside the controller every scenario measures two reference programs,
// each started from outside and measured by /proc exactly as the
// controller is:
//
//	floor        test/floor's program, the memory guard's floor: informers of
//	             the sources and the workload kinds, each object reduced to
//	             name, namespace and resourceVersion, nothing else, on no
//	             typed scheme (as the controller); a binary of its own
//	             (--floor), so that its pages are those of a small client-go
//	             program, not of this one;
//	__zerologic  the zero-logic patcher, this binary run again with a hidden
//	             first argument: the source informers stripped the same way,
//	             and a fixed map from source to reader; an update of a mapped
//	             source patches the reader's pod-template timestamp, with the
//	             controller's client settings and no catalog or decision
//	             (zerologic.go).
//
// Each prints "READY <seconds since start>" on stdout once its caches have
// synced, then "HEAP <bytes in use after GC>", and runs until SIGTERM.
const (
	floorRole     = "__floor" // names the floor's log only
	zeroLogicRole = "__zerologic"
)

// helperRole returns the hidden role this process was started for, if any.
func helperRole() string {
	if len(os.Args) > 1 && os.Args[1] == zeroLogicRole {
		return os.Args[1]
	}
	return ""
}

// helperOptions are the flags of both helper roles.
type helperOptions struct {
	kubeconfig  string
	qps         float64
	burst       int
	workers     int
	mapFile     string // __zerologic: lines "configmap|secret NS NAME RESOURCE NS NAME"
	metricsAddr string // __zerologic: where its queue wait and PATCH figures are served ("" none)
}

// runHelper runs a helper role until SIGTERM.
func runHelper(role string) {
	var h helperOptions
	fs := flag.NewFlagSet(role, flag.ExitOnError)
	fs.StringVar(&h.kubeconfig, "kubeconfig", "", "")
	fs.Float64Var(&h.qps, "qps", 200, "client QPS (the controller's default)")
	fs.IntVar(&h.burst, "burst", 400, "client burst (the controller's default)")
	fs.IntVar(&h.workers, "workers", 16, "patching workers (the controller's default)")
	fs.StringVar(&h.mapFile, "map", "", "")
	fs.StringVar(&h.metricsAddr, "metrics-address", "", "")
	_ = fs.Parse(os.Args[2:])
	began := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rc, err := clientcmd.BuildConfigFromFlags("", h.kubeconfig)
	if err != nil {
		fail("%s: %v", role, err)
	}
	rc.QPS, rc.Burst = float32(h.qps), h.burst
	switch role {
	case zeroLogicRole:
		err = runZeroLogic(ctx, rc, h, began)
	}
	if err != nil && ctx.Err() == nil {
		fail("%s: %v", role, err)
	}
}

// strip is the transform of every helper informer: the object becomes its
// name, namespace and resourceVersion.
func strip(obj interface{}) (interface{}, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion(),
	}}, nil
}

// protobufClientset is what the controller reads sources with.
func protobufClientset(rc *rest.Config) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(rc)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

// sourceInformers starts stripped ConfigMap and Secret informers (protobuf,
// all namespaces, as the controller's) and returns their sync checks.
func sourceInformers(ctx context.Context, rc *rest.Config, handler cache.ResourceEventHandler) ([]cache.InformerSynced, error) {
	cs, err := protobufClientset(rc)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(strip))
	infs := []cache.SharedIndexInformer{factory.Core().V1().ConfigMaps().Informer(), factory.Core().V1().Secrets().Informer()}
	var synced []cache.InformerSynced
	for i, inf := range infs {
		if handler != nil {
			kind := [2]string{"configmap", "secret"}[i]
			if _, err := inf.AddEventHandler(kindHandler{kind: kind, inner: handler}); err != nil {
				return nil, err
			}
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	return synced, nil
}

// kindHandler passes source updates on to the zero-logic patcher, with the
// source kind in place of the old object (which it does not read).
type kindHandler struct {
	kind  string
	inner cache.ResourceEventHandler
}

func (k kindHandler) OnAdd(obj interface{}, initial bool) {}
func (k kindHandler) OnUpdate(oldObj, newObj interface{}) {
	k.inner.OnUpdate(k.kind, newObj)
}
func (k kindHandler) OnDelete(obj interface{}) {}

// reportReady waits for the caches, prints READY and HEAP, and waits for the
// end.
func reportReady(ctx context.Context, began time.Time, synced []cache.InformerSynced) error {
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("caches did not sync")
	}
	fmt.Printf("READY %.6f\n", time.Since(began).Seconds())
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("HEAP %d\n", ms.HeapInuse)
	<-ctx.Done()
	return nil
}
