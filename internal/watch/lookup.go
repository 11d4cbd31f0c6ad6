package watch

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/restart-controller/restart-controller/internal/config"
)

// ConfigError is a mistake in the configuration that only the cluster can
// reveal, such as a misspelled resource of a built-in API group. It is a
// configuration error like those of the config loader: the process reports
// it before watching or writing anything, and exits with status 2.
type ConfigError struct {
	// Problems name their place in the config file: "workloads[2]: ...".
	Problems []string
}

func (e *ConfigError) Error() string { return strings.Join(e.Problems, "\n") }

// BuiltinGroup reports whether kube-apiserver serves the group itself: a
// group of client-go's scheme (the core group "" among them), or one of the
// two its embedded extension and aggregation servers serve. No CRD can add a
// resource to them, so a resource missing from a served built-in
// group-version is a typo, not a CRD that is not installed yet.
func BuiltinGroup(group string) bool {
	return group == "apiextensions.k8s.io" || group == "apiregistration.k8s.io" || scheme.Scheme.IsGroupRegistered(group)
}

// NeededAtStart reports whether the controller needs a source kind served
// to start. One of lifecycle updatesOnly (the CSI driver's) is not: its CRD
// may be installed later, and it is watched once served, as workload kinds
// are.
func NeededAtStart(kind config.SourceKind) bool {
	return kind.Members == nil
}

// Lookup is what discovery says of one configured resource. The controller
// judges a configured kind by it at start (Resolve), and check judges it
// the same way before the controller is deployed.
type Lookup struct {
	// Resource describes it; nil when it is not served.
	Resource *metav1.APIResource
	// GroupVersionServed is set when its group-version is served, with or
	// without it; Served then lists the resources it does serve, sorted,
	// without subresources.
	GroupVersionServed bool
	Served             []string
}

// LookUp asks discovery about the resource. A group-version that is not
// served is an answer, not an error.
func LookUp(disc Discovery, gvr schema.GroupVersionResource) (Lookup, error) {
	list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return Lookup{}, nil
	}
	if err != nil {
		return Lookup{}, err
	}
	found := Lookup{GroupVersionServed: true}
	for i := range list.APIResources {
		r := &list.APIResources[i]
		if r.Name == gvr.Resource {
			found.Resource = r
		}
		if !strings.Contains(r.Name, "/") { // not a subresource
			found.Served = append(found.Served, r.Name)
		}
	}
	slices.Sort(found.Served)
	return found, nil
}

// Misspelled returns the configuration problem of a resource that a served
// built-in group-version does not serve, or "" when there is none. The
// controller refuses to start with such a problem (a *ConfigError); a
// group-version that is not served at all is not one: kube-apiserver may
// serve it later (a newer Kubernetes, --runtime-config), and the
// controller waits for it.
func (l Lookup) Misspelled(gvr schema.GroupVersionResource) string {
	if l.Resource != nil || !l.GroupVersionServed || !BuiltinGroup(gvr.Group) {
		return ""
	}
	group := gvr.Group
	if group == "" {
		group = `the core group ""`
	}
	return fmt.Sprintf("%s is not served by the API server: %s is a built-in API group, so no CRD will add %q to it "+
		"(%s serves: %s); check the group, version and resource",
		gvr, group, gvr.Resource, gvr.GroupVersion(), strings.Join(l.Served, ", "))
}
