package explain

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
)

// Cluster reads objects with the caller's credentials: get and list only.
type Cluster struct {
	Dynamic dynamic.Interface
	// Kube is the typed client, for what status reads beside the
	// configured kinds (the leader's Lease, the metrics through the API
	// server's proxy), and REST its config, for the protobuf lists of
	// ConfigMaps and Secrets; nil in tests of the configured kinds.
	Kube kubernetes.Interface
	REST *rest.Config
}

// Target is what a KIND/NAME argument names: a configured source kind or a
// configured workload kind, and the object's name.
type Target struct {
	Name     string
	Source   *config.SourceKind
	Workload *config.WorkloadKind
}

// Resolve maps kubectl's "TYPE/NAME" (or TYPE and NAME as two arguments)
// to a configured kind, through mapper: cli-runtime's discovery-backed
// RESTMapper, which knows short names (deploy, sts, ds, cm). TYPE may be a short name (deploy), a singular or
// plural resource, or qualified with a group (deployments.apps) or version
// and group (deployments.v1.apps), as kubectl accepts it.
func (c *Config) Resolve(mapper meta.RESTMapper, args []string) (Target, error) {
	var typ, name string
	switch len(args) {
	case 1:
		var ok bool
		if typ, name, ok = strings.Cut(args[0], "/"); !ok || typ == "" || name == "" {
			return Target{}, fmt.Errorf("want KIND/NAME (e.g. deploy/web, cm/app-config), got %q", args[0])
		}
	case 2:
		typ, name = args[0], args[1]
	default:
		return Target{}, errors.New("want one object: KIND/NAME, or KIND NAME")
	}
	gvr, err := resolveType(mapper, typ)
	if err != nil {
		return Target{}, err
	}
	gr := gvr.GroupResource()
	t := Target{Name: name}
	// The configured kinds, named in the error when none is TYPE's.
	var kinds []string
	for i := range c.Sources {
		if c.Sources[i].GVR.GroupResource() == gr {
			t.Source = &c.Sources[i]
			return t, nil
		}
		kinds = append(kinds, c.Sources[i].GVR.GroupResource().String())
	}
	for i := range c.Workloads {
		if c.Workloads[i].GVR.GroupResource() == gr {
			t.Workload = &c.Workloads[i]
			return t, nil
		}
		kinds = append(kinds, c.Workloads[i].GVR.GroupResource().String())
	}
	return Target{}, fmt.Errorf("%s is neither a source nor a workload kind of the config (%s)", gr, strings.Join(kinds, ", "))
}

// resolveType is how kubectl reads a resource argument: "resource.version.group"
// if that is served, else "resource.group" or a bare (short) name.
func resolveType(mapper meta.RESTMapper, typ string) (schema.GroupVersionResource, error) {
	typ = strings.ToLower(typ)
	full, gr := schema.ParseResourceArg(typ)
	if full != nil {
		if gvr, err := mapper.ResourceFor(*full); err == nil {
			return gvr, nil
		}
	}
	gvr, err := mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		if meta.IsNoMatchError(err) {
			return schema.GroupVersionResource{}, fmt.Errorf("the server doesn't have a resource type %q", typ)
		}
		return schema.GroupVersionResource{}, err
	}
	return gvr, nil
}

// Get returns an object of a configured kind, nil when it does not exist.
func (cl *Cluster) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	u, err := cl.Dynamic.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

// ErrUnselected is a source's fetch error when its labels do not match the
// config's sourceSelector: the controller's caches never hold it.
var ErrUnselected = errors.New("its labels do not match the config's sourceSelector")

// Fetcher reads sources and reduces them at once to per-key digests, as the
// controller's cache does, keeping the annotations named; values go no
// further. A source that selector does not select is ErrUnselected.
func (cl *Cluster) Fetcher(ctx context.Context, keep []string, selector labels.Selector) SourceFetcher {
	return func(kind config.SourceKind, namespace, name string) (*catalog.SourceState, error) {
		if kind.Members != nil {
			return cl.fetchMembers(ctx, kind, namespace, name, selector)
		}
		u, err := cl.Get(ctx, kind.GVR, namespace, name)
		if err != nil || u == nil {
			return nil, err
		}
		if !selector.Matches(labels.Set(u.GetLabels())) {
			return nil, fmt.Errorf("%s/%s/%s: %w %q", kind.Name, namespace, name, ErrUnselected, selector.String())
		}
		return catalog.SourceReducer{DataFields: kind.DataFields, Keep: keep}.Reduce(u)
	}
}

// NamespaceLabels returns a reader of Namespaces' labels.
func (cl *Cluster) NamespaceLabels(ctx context.Context) func(namespace string) (map[string]string, error) {
	return func(namespace string) (map[string]string, error) {
		u, err := cl.Get(ctx, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", namespace)
		if err != nil {
			return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
		}
		if u == nil {
			return nil, nil
		}
		return u.GetLabels(), nil
	}
}

// SourceNames returns a lister of the names of the sources of a kind in a
// namespace, which a workload's regex source lists are matched against
// (metadata only: no source data is read).
// Only sources selector selects are named, as only those are in the
// controller's caches.
func (cl *Cluster) SourceNames(ctx context.Context, selector labels.Selector) func(kind config.SourceKind, namespace string) ([]string, error) {
	return func(kind config.SourceKind, namespace string) ([]string, error) {
		list, err := cl.Dynamic.Resource(kind.GVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", kind.GVR.GroupResource(), namespace, err)
		}
		names := make([]string, len(list.Items))
		for i := range list.Items {
			names[i] = list.Items[i].GetName()
		}
		return names, nil
	}
}

// Workloads lists the workloads of every configured kind in a namespace, with
// the config's selector as the controller lists them. A kind the API server
// does not serve (a CRD not installed) has none; a kind that cannot be listed
// is returned in skipped with the reason.
func (cl *Cluster) Workloads(ctx context.Context, c *Config, namespace string) (workloads []Workload, skipped []string) {
	for _, kind := range c.Workloads {
		list, err := cl.Dynamic.Resource(kind.GVR).Namespace(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: c.WorkloadSelector.String(),
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", kind.GVR.GroupResource(), err))
			continue
		}
		for i := range list.Items {
			workloads = append(workloads, Workload{Kind: kind, Object: &list.Items[i]})
		}
	}
	return workloads, skipped
}
