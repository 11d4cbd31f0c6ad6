// Command floor is the memory floor the controller's memory guard
// (test/e2e/memory_test.go) measures beside the controller: what any
// controller of this kind needs, on the same client-go parts the controller
// links. Informers, each object reduced to its name, namespace and
// resourceVersion, and nothing else: ConfigMaps and Secrets (protobuf, as
// the controller reads them) and Deployments, StatefulSets and DaemonSets
// (dynamic, as the controller reads any configured kind); leader election
// on a Lease (client-go's tools/leaderelection) and an Event recorded once
// its caches have synced (client-go's tools/events), both on client-go's
// typed clientset. It is hack/bench's __floor role, scoped to namespaces so
// that a shared test cluster's other objects do not count, and a binary of
// its own so that its file-backed pages are those of a small client-go
// program, not of the bench.
//
// The controller links the clientset, leader election and Events for what
// they are (client-go's own, which every Kubernetes engineer knows); so
// does the floor, so that the guard's ratio compares like with like: a
// floor without them was 10 MiB lighter (BENCHMARKS.md, "With client-go's
// clientset, leader election and Events").
//
// Once its caches have synced it prints "READY <seconds since it started>"
// and, after a garbage collection, "HEAP <bytes of heap in use>" (the
// memory guard reads the first, hack/bench both), then runs until SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	goruntime "runtime"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func main() {
	began := time.Now()
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	namespaces := flag.String("namespaces", "", "comma-separated namespaces to watch (empty: all)")
	leaseNamespace := flag.String("lease-namespace", "", "namespace of the Lease named floor (empty: the first namespace watched, or default)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, began, *kubeconfig, strings.FieldsFunc(*namespaces, func(r rune) bool { return r == ',' }), *leaseNamespace)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// workloadGVRs are the controller's default workload kinds.
var workloadGVRs = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "apps", Version: "v1", Resource: "daemonsets"},
}

func run(ctx context.Context, began time.Time, kubeconfig string, namespaces []string, leaseNamespace string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("typed clientset: %w", err)
	}
	protobuf := rest.CopyConfig(rc)
	protobuf.ContentType = runtime.ContentTypeProtobuf
	protobuf.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	core, err := corev1client.NewForConfig(protobuf)
	if err != nil {
		return fmt.Errorf("core client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if leaseNamespace == "" {
		leaseNamespace = metav1.NamespaceDefault
		if len(namespaces) > 0 {
			leaseNamespace = namespaces[0]
		}
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	lease := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: "floor"}}
	recorder, stopEvents, err := recordEvents(ctx, client)
	if err != nil {
		return err
	}
	defer stopEvents()
	electionCtx, stopElection := context.WithCancel(ctx)
	elected, err := elect(electionCtx, client, lease)
	if err != nil {
		stopElection()
		return err
	}
	defer func() { stopElection(); <-elected }() // the lease released
	var informers []cache.SharedIndexInformer
	all := func(*metav1.ListOptions) {}
	for _, ns := range namespaces {
		informers = append(informers,
			cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(core.RESTClient(), "configmaps", ns, all), &corev1.ConfigMap{}, 0, nil),
			cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(core.RESTClient(), "secrets", ns, all), &corev1.Secret{}, 0, nil))
		for _, gvr := range workloadGVRs {
			informers = append(informers, dynamicInformer(dyn, gvr, ns))
		}
	}
	var synced []cache.InformerSynced
	for _, inf := range informers {
		if err := inf.SetTransform(strip); err != nil {
			return fmt.Errorf("transform: %w", err)
		}
		synced = append(synced, inf.HasSynced)
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	fmt.Printf("READY %.6f\n", time.Since(began).Seconds())
	recorder.Eventf(lease, nil, corev1.EventTypeNormal, "Synced", "Watch", "caches synced")
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	fmt.Printf("HEAP %d\n", ms.HeapInuse)
	<-ctx.Done()
	return nil
}

// recordEvents records Events with client-go's tools/events, as the
// controller does; stop shuts the broadcaster down.
func recordEvents(ctx context.Context, client kubernetes.Interface) (events.EventRecorder, func(), error) {
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	sinkCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := broadcaster.StartRecordingToSinkWithContext(sinkCtx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("recording Events: %w", err)
	}
	return broadcaster.NewRecorder(scheme.Scheme, "floor"), func() { broadcaster.Shutdown(); cancel() }, nil
}

// elect runs client-go's leader election on lease until ctx ends, then
// releases it and closes done. Leading, the floor does nothing more: the
// controller's caches are warm before it leads too.
func elect(ctx context.Context, client kubernetes.Interface, lease *coordinationv1.Lease) (done chan struct{}, err error) {
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader identity: %w", err)
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{LeaseMeta: lease.ObjectMeta, Client: client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("%s-%d", hostname, os.Getpid())}},
		Name:            lease.Name,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	done = make(chan struct{})
	go func() {
		defer close(done)
		elector.Run(ctx)
	}()
	return done, nil
}

// strip reduces every cached object to name, namespace and resourceVersion.
func strip(obj interface{}) (interface{}, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion(),
	}}, nil
}

// dynamicInformer is the informer client-go's dynamicinformer builds, as
// the controller builds it.
func dynamicInformer(client dynamic.Interface, gvr schema.GroupVersionResource, namespace string) cache.SharedIndexInformer {
	resource := client.Resource(gvr).Namespace(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{ObjectDescription: gvr.String()})
}
