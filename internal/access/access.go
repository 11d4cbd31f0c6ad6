// Package access names the permissions the controller uses: the verbs,
// by what it does with an object, and every grant a configuration needs.
// check reviews them against the cluster, the watcher's access reviews
// degrade a kind that lacks them, and tests hold manifests/rbac.yaml, the
// chart and the README to them.
package access

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/config"
)

// The verbs the controller uses, by what it does with an object: the one
// place they are written.

// SourceVerbs: informers list and watch sources (the absence check is a
// metadata-only list).
func SourceVerbs() []string { return []string{"list", "watch"} }

// WorkloadVerbs: informers list and watch workloads, and restarts patch them.
func WorkloadVerbs() []string { return []string{"list", "watch", "patch"} }

// ReadWholeVerbs: the runNow, recreate and envVar strategies read the whole
// workload (its Job template, all of it, or its containers) just before
// they act; the cache keeps only its reduced state.
func ReadWholeVerbs() []string { return []string{"get"} }

// RunNowVerbs: runNow creates a Job, and reads it back to follow it.
func RunNowVerbs() []string { return []string{"create", "get"} }

// RecreateVerbs: recreate deletes a workload and creates it again.
func RecreateVerbs() []string { return []string{"delete", "create"} }

// EventVerbs: Events (events.k8s.io) on workloads, created then patched as
// they repeat.
func EventVerbs() []string { return []string{"create", "patch"} }

// KeySecretVerbs: the checksum key Secret is read, and created on first
// start.
func KeySecretVerbs() []string { return []string{"get", "create"} }

// LeaseVerbs: leader election on a Lease.
func LeaseVerbs() []string { return []string{"get", "create", "update"} }

// NamespaceVerbs: with a namespaceSelector, a metadata-only informer lists
// and watches Namespaces for their labels.
func NamespaceVerbs() []string { return []string{"list", "watch"} }

// Need is a set of verbs the controller uses on one resource, in a namespace
// ("" for all namespaces).
type Need struct {
	Resource  schema.GroupResource
	Verbs     []string
	Namespace string
	Why       string
	// Name is the one object the verbs concern, when the controller only
	// needs them on that object (RBAC may grant them by resourceNames);
	// create is never limited to a name.
	Name string
}

// Needs lists every permission the controller uses with this configuration:
// its informers list and watch every source and workload kind, it patches
// workloads, records Events on them, reads (creating it once) its checksum
// key Secret in its own namespace, reads the Secrets holding notification
// sinks' URLs there, and holds a Lease when leader election is on.
func Needs(c *config.Config) []Need {
	var out []Need
	for _, ns := range c.WatchedNamespaces() {
		for _, s := range c.Sources {
			out = append(out, Need{Resource: s.GVR.GroupResource(), Verbs: SourceVerbs(), Namespace: ns, Why: "source kind " + s.Name})
		}
		for _, w := range c.Workloads {
			out = append(out, Need{Resource: w.GVR.GroupResource(), Verbs: WorkloadVerbs(), Namespace: ns, Why: "workload kind"})
			out = append(out, strategyNeeds(w, ns)...)
		}
		out = append(out, Need{Resource: schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, Verbs: EventVerbs(),
			Namespace: ns, Why: "Events on workloads"})
	}
	switch {
	case c.NamespaceSelector != nil:
		out = append(out, Need{Resource: schema.GroupResource{Resource: "namespaces"}, Verbs: NamespaceVerbs(),
			Why: "the namespaceSelector reads Namespaces' labels"})
	case c.WindowsSelectNamespaces():
		out = append(out, Need{Resource: schema.GroupResource{Resource: "namespaces"}, Verbs: NamespaceVerbs(),
			Why: "restart windows' namespaceSelectors read Namespaces' labels"})
	}
	out = append(out, Need{Resource: schema.GroupResource{Resource: "secrets"}, Verbs: KeySecretVerbs(),
		Namespace: c.Settings.LeaseNamespace, Why: "the checksum key Secret " + c.Settings.ChecksumKeySecret,
		Name: c.Settings.ChecksumKeySecret})
	out = append(out, notificationNeeds(c)...)
	if c.Settings.LeaderElect {
		out = append(out, Need{Resource: schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, Verbs: LeaseVerbs(),
			Namespace: c.Settings.LeaseNamespace, Why: "leader election"})
	}
	return out
}

// strategyNeeds are the verbs a kind's restart strategies use beyond a patch:
// none for templateAnnotation and timestampAt, so an install that configures
// none of runNow, recreate and envVar grants nothing more.
func strategyNeeds(w config.WorkloadKind, ns string) []Need {
	var out []Need
	runNow, recreate := w.Restart.Uses(config.RunNow), w.Restart.Uses(config.Recreate)
	if runNow || recreate || w.Restart.Uses(config.EnvVar) {
		out = append(out, Need{Resource: w.GVR.GroupResource(), Verbs: ReadWholeVerbs(), Namespace: ns, Why: "workload kind restarted by runNow, recreate or envVar"})
	}
	if runNow {
		out = append(out, Need{Resource: config.JobResource().GroupResource(), Verbs: RunNowVerbs(), Namespace: ns, Why: "Jobs started by runNow"})
	}
	if recreate {
		out = append(out, Need{Resource: w.GVR.GroupResource(), Verbs: RecreateVerbs(), Namespace: ns, Why: "workload kind restarted by recreate"})
	}
	return out
}

// NotifySecretVerbs: the Secret holding a sink's URL is read, by name only.
func NotifySecretVerbs() []string { return []string{"get"} }

// notificationNeeds lists the reads of the Secrets holding sink URLs, one
// per Secret, in the controller's namespace.
func notificationNeeds(c *config.Config) []Need {
	var out []Need
	var seen []string
	for _, s := range c.Sinks {
		if slices.Contains(seen, s.URLSecret.Name) {
			continue
		}
		seen = append(seen, s.URLSecret.Name)
		out = append(out, Need{Resource: schema.GroupResource{Resource: "secrets"}, Verbs: NotifySecretVerbs(),
			Namespace: c.Settings.LeaseNamespace, Why: "the URL of notification sink " + s.Name, Name: s.URLSecret.Name})
	}
	return out
}
