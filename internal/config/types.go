package config

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// Config is the validated, compiled configuration. It is immutable once built
// and shared by every package without locks.
type Config struct {
	Settings    Settings
	Annotations Annotations
	// Namespaces limits watching to these namespaces; empty means all.
	Namespaces []string
	// IgnoredNamespaces are never watched (a field selector on every list
	// and watch: IgnoredNamespacesField).
	IgnoredNamespaces []string
	// NamespaceSelector selects the namespaces whose workloads are acted
	// on; nil when unset (no namespace is read then).
	NamespaceSelector labels.Selector
	// WorkloadSelector filters workloads by label; labels.Everything() when unset.
	WorkloadSelector labels.Selector
	// SourceSelector filters sources by label on the API server;
	// labels.Everything() when unset.
	SourceSelector labels.Selector
	Sources        []SourceKind
	// sourceKinds are the names of Sources, for OptInRules.
	sourceKinds []string
	Workloads   []WorkloadKind
	Extractors  []*refs.Extractor
	// OrderByResourceVersion compares resourceVersions across sources and
	// workloads to tell which write came first (docs/design.md).
	OrderByResourceVersion bool
	// Waves pace the restarts of one change of one source; their
	// MaxInFlight caps the paced rollouts under way across the controller.
	Waves Waves
	// Breaker holds a workload restarted too often.
	Breaker Breaker
	// OptIns are the opt-in annotations beside Annotations.OptIn, and
	// SourceLists the annotations listing sources by name (package optin
	// reads them: OptInRules).
	OptIns      []OptIn
	SourceLists []SourceList
	// Excludes are the workload annotations listing sources of one kind
	// whose changes restart it not (OptInRules).
	Excludes []Exclude
	// OptInAll opts every watched workload in unless it opts out (OptInRules).
	OptInAll bool
	// Sinks receive notifications (notifications.go).
	Sinks []Sink
	// Windows are the restart windows (windows.go), in the file's order:
	// a namespace's default window is the first whose selector selects it.
	Windows []Window
	// MinIntervalAnnotations are workload annotations read as its minimum
	// interval beside Annotations.MinInterval, in order.
	MinIntervalAnnotations []string
	// SourceLifecycle says whether creations and deletions of optional
	// sources restart their readers.
	SourceLifecycle SourceLifecycle
	// IgnoreAnnotations are source annotations that, "true", make changes
	// restart nothing, beside Annotations.Ignore.
	IgnoreAnnotations []string
}

// SourceLifecycle is FileSourceLifecycle compiled (no checks needed), and
// what the caches' view of sources says of their existence.
type SourceLifecycle struct {
	RestartOnCreate bool
	RestartOnDelete bool
	// AbsentUnknown: a source the caches do not hold may exist unselected
	// (a sourceSelector), so its absence says nothing: it is neither
	// compared nor recorded, what was recorded for it is kept, and
	// creations and deletions restart nothing.
	AbsentUnknown bool
	// UpdatesOnly are the source kinds (SourceKind.Name) of lifecycle
	// updatesOnly: a source of theirs without members is unknown, as
	// under AbsentUnknown, and is never recorded absent.
	UpdatesOnly []string
}

// Unknown reports whether a source of the kind that the caches do not
// hold must be left as it was recorded rather than compared as absent.
func (l SourceLifecycle) Unknown(kind string) bool {
	return l.AbsentUnknown || slices.Contains(l.UpdatesOnly, kind)
}

// Settings are the process settings layered from defaults, file, env and flags.
type Settings struct {
	ConfigFile     string
	Kubeconfig     string
	GracePeriod    time.Duration
	CheckPeriod    time.Duration
	IgnoredErrors  []string
	MetricsAddress string
	KubeAPIQPS     float32
	KubeAPIBurst   int
	Workers        int
	LogFormat      string // "text" or "json"
	Verbose        bool
	// EnableProfiling serves pprof under /debug/pprof/ on the metrics address.
	EnableProfiling bool
	// DryRun decides, logs, reports and counts as usual but patches nothing.
	DryRun bool
	// ChecksumKeySecret names the Secret, in LeaseNamespace (the
	// controller's own namespace), holding the key of the checksums.
	ChecksumKeySecret string
	// ReloaderMetrics exports Reloader's reload counter too, and
	// ReloaderMetricsByNamespace its per-namespace one (metrics.*).
	ReloaderMetrics            bool
	ReloaderMetricsByNamespace bool

	// Leader election on a coordination.k8s.io Lease.
	LeaderElect        bool
	LeaseNamespace     string
	LeaseName          string
	LeaderIdentity     string
	LeaseDuration      time.Duration
	LeaseRenewDeadline time.Duration
	LeaseRetryPeriod   time.Duration
}

// Annotations are the annotation keys the controller reads and writes:
// the file's, checked (checkAnnotations).
type Annotations = FileAnnotations

// SourceKind is a watched source resource, e.g. ConfigMaps.
type SourceKind struct {
	// Name prefixes checksum keys ("configmap/NS/NAME") and is what extractors name.
	Name       string
	GVR        schema.GroupVersionResource
	DataFields []string // top-level fields whose string map entries are hashed
	// Members is set for a kind of lifecycle updatesOnly: its objects are
	// members of the source named by Members.Name, their data its items.
	Members *refs.Members
	// EnvVarKind ends the envVar strategy's variable for a source of the
	// kind: STAKATER_<NAME>_<EnvVarKind> (EnvVarName).
	EnvVarKind string
}

// WorkloadKind is a watched pod-template workload resource.
type WorkloadKind struct {
	GVR             schema.GroupVersionResource
	PodTemplatePath refs.Path
	// NotRolledWhen are the conditions under which a template change
	// replaces no pods.
	NotRolledWhen []Condition
	// Rollout reads the kind's status after a restart.
	Rollout rollout.Rule
	// Restart is how its workloads are restarted (strategy.go).
	Restart Restart
	// MinInterval is the least time between two restarts of a workload.
	MinInterval time.Duration
}

// Condition holds when the single value at Path equals Equals; or, with
// Element set, when no element of the list at Path satisfies Element.
type Condition struct {
	Path refs.Path
	// Equals is a string, a bool or a float64.
	Equals interface{}
	// Element, when set, is the condition each element of the list at Path
	// is tested with (its Path from the element); Equals is unused then.
	Element *Condition
}

// Holds reports whether the condition holds for the object. Numbers compare
// by value, whatever their Go type: JSON gives int64 or float64.
func (c Condition) Holds(obj map[string]interface{}) bool {
	v, ok := c.Path.Value(obj)
	if c.Element != nil {
		return c.noElement(v, ok)
	}
	if !ok {
		return false
	}
	if want, isNumber := c.Equals.(float64); isNumber {
		got, ok := asFloat(v)
		return ok && got == want
	}
	return v == c.Equals
}

// noElement: a missing (or null) list has no element; a value that is not
// a list says nothing, so the condition does not hold on it.
func (c Condition) noElement(v interface{}, found bool) bool {
	if !found || v == nil {
		return true
	}
	list, ok := v.([]interface{})
	if !ok {
		return false
	}
	for _, e := range list {
		if m, ok := e.(map[string]interface{}); ok && c.Element.Holds(m) {
			return false
		}
	}
	return true
}

// String describes the condition for logs and Events, e.g. "spec.paused is
// true", "spec.triggers has no element whose type is ConfigChange".
func (c Condition) String() string {
	if c.Element != nil {
		return fmt.Sprintf("%s has no element whose %s is %v", c.Path, c.Element.Path, c.Element.Equals)
	}
	return fmt.Sprintf("%s is %v", c.Path, c.Equals)
}

// IgnoredNamespacesField is the field selector that keeps the ignored
// namespaces out of every list and watch across all namespaces, or "".
func (c *Config) IgnoredNamespacesField() string {
	if len(c.IgnoredNamespaces) == 0 || len(c.Namespaces) > 0 {
		return ""
	}
	sel := make([]fields.Selector, len(c.IgnoredNamespaces))
	for i, ns := range c.IgnoredNamespaces {
		sel[i] = fields.OneTermNotEqualSelector("metadata.namespace", ns)
	}
	return fields.AndSelectors(sel...).String()
}

// WatchedNamespaces are the namespaces listed and watched, one list and
// watch each: those configured, else all (metav1.NamespaceAll).
func (c *Config) WatchedNamespaces() []string {
	if len(c.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return c.Namespaces
}

// NamespaceIgnored reports whether the namespace is one of IgnoredNamespaces.
func (c *Config) NamespaceIgnored(namespace string) bool {
	return slices.Contains(c.IgnoredNamespaces, namespace)
}

// Waves are the settings of health-gated waves.
type Waves = FileWaves

// Breaker holds a workload restarted more than Budget times within Window
// until its sources stay still for Quiet; the changes merged meanwhile then
// restart it once. A Budget of 0 turns it off.
type Breaker struct {
	Budget int
	Window time.Duration
	Quiet  time.Duration
}
