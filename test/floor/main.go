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
// It prints "READY" once its caches have synced and runs until SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	namespaces := flag.String("namespaces", "", "comma-separated namespaces to watch (empty: all)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *kubeconfig, strings.FieldsFunc(*namespaces, func(r rune) bool { return r == ',' }))
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

func run(ctx context.Context, kubeconfig string, namespaces []string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	pb := rest.CopyConfig(rc)
	pb.ContentType = "application/vnd.kubernetes.protobuf"
	pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(pb)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		typed := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns), informers.WithTransform(strip))
		synced = append(synced, typed.Core().V1().ConfigMaps().Informer().HasSynced, typed.Core().V1().Secrets().Informer().HasSynced)
		typed.Start(ctx.Done())
		untyped := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
		for _, gvr := range workloadGVRs {
			inf := untyped.ForResource(gvr).Informer()
			if err := inf.SetTransform(strip); err != nil {
				return fmt.Errorf("transform of %s: %w", gvr.Resource, err)
			}
			synced = append(synced, inf.HasSynced)
		}
		untyped.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	fmt.Println("READY")
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
