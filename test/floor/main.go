// Command floor is the memory floor the controller's memory guard
// (test/e2e/memory_test.go) measures beside the controller: the informers
// any controller of this kind needs, each object reduced to its name,
// namespace and resourceVersion, and nothing else: ConfigMaps and Secrets
// (protobuf, as the controller reads them) and Deployments, StatefulSets and
// DaemonSets (dynamic, as the controller reads any configured kind). It is
// hack/bench's __floor role, scoped to namespaces so that a shared test
// cluster's other objects do not count, and a binary of its own so that its
// file-backed pages are those of a small client-go program, not of the bench.
//
// Like the controller it links none of client-go's typed scheme, clientset
// or informers (which register every API group): the floor of a controller
// that does, it was heavier than the controller once the controller stopped
// (BENCHMARKS.md, "Binary and idle memory"). Its core/v1 client is
// internal/kube's, the controller's.
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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/restart-controller/restart-controller/internal/kube"
)

func main() {
	began := time.Now()
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	namespaces := flag.String("namespaces", "", "comma-separated namespaces to watch (empty: all)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, began, *kubeconfig, strings.FieldsFunc(*namespaces, func(r rune) bool { return r == ',' }))
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

func run(ctx context.Context, began time.Time, kubeconfig string, namespaces []string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	core, err := rest.RESTClientFor(kube.RESTConfigFor(rc, corev1.SchemeGroupVersion, true))
	if err != nil {
		return fmt.Errorf("core client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var informers []cache.SharedIndexInformer
	all := func(*metav1.ListOptions) {}
	for _, ns := range namespaces {
		informers = append(informers,
			cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(core, "configmaps", ns, all), &corev1.ConfigMap{}, 0, nil),
			cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(core, "secrets", ns, all), &corev1.Secret{}, 0, nil))
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
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	fmt.Printf("HEAP %d\n", ms.HeapInuse)
	<-ctx.Done()
	return nil
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
