package status

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain"
)

// pageSize bounds each list request: an object is reduced as its page
// arrives, so at most a page of whole objects is held at a time.
const pageSize = 500

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Read lists, with the caller's credentials, the configured source and
// workload kinds in the namespaces of scope ("" alone: all), as the
// controller lists them (its selectors), reduced as they arrive. A kind
// that cannot be listed is named in the listing, and the rest is read; a
// kind the API server does not serve (a CRD not installed) has no objects.
func Read(ctx context.Context, cl *explain.Cluster, cfg *explain.Config, scope []string) *Listing {
	var nsLabels func(string) (map[string]string, error)
	var nsProblem string
	if cfg.NamespaceSelector != nil || cfg.WindowsSelectNamespaces() {
		nsLabels, nsProblem = namespaceLabels(ctx, cl)
	}
	l := NewListing(cfg, scope, nsLabels)
	if nsProblem != "" {
		l.NotRead(nsProblem)
	}
	// A source list may name a source in another namespace: read it as
	// explain does, one GET each.
	l.outside, l.outsideNames = cl.Fetcher(ctx, cfg.SourceAnnotations(), cfg.SourceSelector), cl.SourceNames(ctx, cfg.SourceSelector)

	// Each kind and namespace is one listing of its own, run side by side
	// (the API server's time is most of the wait); the listing is filled
	// from them one at a time.
	var jobs []listJob
	for _, ns := range scope {
		for i := range cfg.Sources {
			jobs = append(jobs, listJob{source: &cfg.Sources[i], ns: ns})
		}
		for i := range cfg.Workloads {
			jobs = append(jobs, listJob{workload: &cfg.Workloads[i], ns: ns})
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range jobs {
		j := &jobs[i]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			j.err = j.run(ctx, cl, cfg, l, &mu)
		})
	}
	wg.Wait()
	for _, j := range jobs {
		switch {
		case j.err == nil:
		case j.source != nil:
			l.SourceKindFailed(*j.source, j.ns, j.err)
		default:
			l.WorkloadKindFailed(*j.workload, j.ns, j.err)
		}
	}
	return l
}

// listJob is one of Read's listings: a source or a workload kind, in one
// namespace ("": all), and why it failed.
type listJob struct {
	source   *config.SourceKind
	workload *config.WorkloadKind
	ns       string
	err      error
}

// run lists the job's kind into the listing, which mu guards, page by
// page: sources of a kind with a protobuf path (protobufSources) straight
// into reduced states, the rest as objects. A kind the API server does not
// serve has no objects.
func (j *listJob) run(ctx context.Context, cl *explain.Cluster, cfg *explain.Config, l *Listing, mu *sync.Mutex) error {
	var err error
	if j.workload != nil {
		err = listPages(ctx, cl, j.workload.GVR, j.ns, cfg.WorkloadSelector.String(), func(u *unstructured.Unstructured) error {
			mu.Lock()
			defer mu.Unlock()
			l.AddWorkload(*j.workload, u)
			return nil
		})
	} else if lister, ok := protobufSources(cl.REST, *j.source, cfg.SourceAnnotations()); ok {
		err = lister(ctx, j.ns, cfg.SourceSelector.String(), func(id catalog.SourceID, s *catalog.SourceState) {
			mu.Lock()
			defer mu.Unlock()
			l.AddSourceState(id, s)
		})
	} else {
		err = listPages(ctx, cl, j.source.GVR, j.ns, cfg.SourceSelector.String(), func(u *unstructured.Unstructured) error {
			mu.Lock()
			defer mu.Unlock()
			return l.AddSource(*j.source, u)
		})
	}
	if apierrors.IsNotFound(err) {
		return nil // not served: none of its kind
	}
	return err
}

// listPages lists a resource page by page, handing each object over as its
// page arrives.
func listPages(ctx context.Context, cl *explain.Cluster, gvr schema.GroupVersionResource, namespace, selector string, each func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: pageSize}
	for {
		list, err := cl.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			if err := each(&list.Items[i]); err != nil {
				return err
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// sourceKinds are the kinds whose lists decode in protobuf straight into
// reduced states (catalog.SourceReducer.ProtobufSources).
var sourceKinds = map[schema.GroupVersionResource]string{
	{Version: "v1", Resource: "configmaps"}: "ConfigMap",
	{Version: "v1", Resource: "secrets"}:    "Secret",
}

// protobufSources returns a lister of the sources of kind that reads them
// as the controller's informers do: in protobuf, each reduced to its
// digests as it is decoded, its data never decoded into maps (30,000
// sources as JSON were half of status's CPU time); false for a kind that
// has no such path, or without a REST config (tests of the configured
// kinds).
func protobufSources(rc *rest.Config, kind config.SourceKind, keep []string) (func(ctx context.Context, namespace, selector string,
	each func(catalog.SourceID, *catalog.SourceState)) error, bool) {
	name, ok := sourceKinds[kind.GVR]
	if !ok || rc == nil {
		return nil, false
	}
	cfg := catalog.CoreProtobuf(rc)
	reducer := catalog.SourceReducer{DataFields: kind.DataFields, Keep: keep}
	serializer, ok := reducer.ProtobufSources(kind.GVR.GroupVersion().WithKind(name), cfg.NegotiatedSerializer)
	if !ok {
		return nil, false
	}
	cfg.NegotiatedSerializer = serializer
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, false
	}
	return func(ctx context.Context, namespace, selector string, each func(catalog.SourceID, *catalog.SourceState)) error {
		opts := metav1.ListOptions{LabelSelector: selector, Limit: pageSize}
		for {
			// Get, as the informers' lists do: the codec chooses what the
			// answer decodes into.
			obj, err := client.Get().Namespace(namespace).Resource(kind.GVR.Resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Get()
			if err != nil {
				return err
			}
			list, ok := obj.(*catalog.SourceStateList)
			if !ok {
				return fmt.Errorf("listing %s: got %T", kind.GVR.Resource, obj)
			}
			for i := range list.Items {
				s := &list.Items[i]
				each(catalog.SourceID{Kind: kind.Name, Namespace: s.Namespace, Name: s.Name}, s)
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				return nil
			}
		}
	}, true
}

// namespaceLabels lists the Namespaces' labels once, for a
// namespaceSelector and for the restart windows of namespaces; it says what
// is lost when they cannot be listed.
func namespaceLabels(ctx context.Context, cl *explain.Cluster) (func(string) (map[string]string, error), string) {
	labels := map[string]map[string]string{}
	err := listPages(ctx, cl, namespacesGVR, "", "", func(u *unstructured.Unstructured) error {
		labels[u.GetName()] = u.GetLabels()
		return nil
	})
	if err != nil {
		return func(string) (map[string]string, error) { return nil, err },
			fmt.Sprintf("namespaces: %v (the config's namespaceSelector and the restart windows of namespaces need their labels: "+
				"with a namespaceSelector no workload is shown)", err)
	}
	return func(ns string) (map[string]string, error) { return labels[ns], nil }, ""
}
