package config

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/restart-controller/restart-controller/internal/refs"
)

// File is the config file's schema. Decoding is strict: a key not named by a
// json tag here is an error, as is a value of the wrong type. Keys left out
// keep the built-in default (defaults.yaml; examples/config.yaml shows it).
type File struct {
	// RestartCheckPeriod is how often pending restarts are checked: a bare
	// number of milliseconds or a Go duration.
	RestartCheckPeriod MillisOrDuration `json:"restartCheckPeriod"`
	// RestartGracePeriod is how long to wait after a source change before
	// restarting: a bare number of seconds or a Go duration.
	RestartGracePeriod SecondsOrDuration `json:"restartGracePeriod"`
	// IgnoredErrors are errors to ignore.
	IgnoredErrors []string `json:"ignoredErrors"`
	Verbose       bool     `json:"verbose"`
	// EnableProfiling serves Go's pprof on the metrics address; off by default
	// because profiles reveal internals to anyone who can reach the port.
	EnableProfiling bool `json:"enableProfiling"`
	// DryRun decides, logs, reports (Events say "would restart") and counts
	// as usual, but patches nothing: for trying the controller on a cluster
	// before letting it write.
	DryRun bool `json:"dryRun"`
	// ChecksumKeySecret names the Secret in the controller's namespace
	// (leaderElection.namespace) that holds the checksums' HMAC key; the
	// controller creates it when absent.
	ChecksumKeySecret string             `json:"checksumKeySecret"`
	MetricsAddress    string             `json:"metricsAddress"`
	KubeAPIQPS        float64            `json:"kubeAPIQPS"`
	KubeAPIBurst      int                `json:"kubeAPIBurst"`
	Workers           int                `json:"workers"`
	LogFormat         string             `json:"logFormat"`
	LeaderElection    FileLeaderElection `json:"leaderElection"`

	Annotations FileAnnotations `json:"annotations"`
	// Namespaces limits watching to these namespaces; empty means all.
	Namespaces []string `json:"namespaces"`
	// IgnoredNamespaces are namespaces whose workloads and sources are not
	// watched at all (a field selector on every list and watch, so nothing
	// of them is kept in memory). With namespaces set, an ignored namespace
	// that is also listed there is an error.
	IgnoredNamespaces []string `json:"ignoredNamespaces"`
	// NamespaceSelector is a Kubernetes label selector on Namespaces; empty
	// selects all. Workloads in a namespace it does not select are not acted
	// on (nothing is written on them), and a namespace whose labels change
	// starts or stops being selected while the controller runs. It applies
	// within namespaces when both are set.
	NamespaceSelector string `json:"namespaceSelector"`
	// WorkloadSelector is a Kubernetes label selector; empty selects all.
	WorkloadSelector string `json:"workloadSelector"`
	// SourceSelector is a Kubernetes label selector on sources, applied by
	// the API server to every source list and watch; empty selects all. A
	// source it does not select is not known to the controller: a workload
	// reading one is neither restarted for it nor records it.
	SourceSelector string             `json:"sourceSelector"`
	Sources        []FileSourceKind   `json:"sources"`
	Workloads      []FileWorkloadKind `json:"workloads"`
	// References are the pod spec fields that name source objects, relative
	// to the pod spec (<podTemplatePath>.spec).
	References []refs.Spec `json:"references"`
	// OrderByResourceVersion orders source updates and template changes by
	// their resourceVersions (etcd revisions), so that an update the pods of
	// a new template already read restarts nothing. Turn it off when the API
	// server keeps sources and workloads in different storage
	// (--etcd-servers-overrides), where the numbers do not compare.
	OrderByResourceVersion bool `json:"orderByResourceVersion"`
	// Waves pace the restarts one change of one source causes.
	Waves FileWaves `json:"waves"`
	// Breaker holds a workload restarted too often.
	Breaker FileBreaker `json:"breaker"`
	// OptInAnnotations are more workload annotations that opt a workload in,
	// beside annotations.optIn: other restart controllers' opt-ins, so that
	// a team switches by changing this file, not its manifests
	// (examples/presets).
	OptInAnnotations []FileOptInAnnotation `json:"optInAnnotations"`
	// SourceListAnnotations are workload annotations that list, by name,
	// sources the workload reads besides those its pod spec names (an app
	// that reads them through the API, or a peer's "reload" list).
	SourceListAnnotations []FileSourceListAnnotation `json:"sourceListAnnotations"`
	// ExcludeAnnotations are workload annotations listing, by name, sources
	// of one kind whose changes restart the workload not: an opt-out, like
	// annotations.ignoreSources (the changes are recorded).
	ExcludeAnnotations []FileExcludeAnnotation `json:"excludeAnnotations"`
	// OptInAll opts every watched workload in (within namespaces and
	// workloadSelector), for each source kind, unless an opt-in annotation
	// with optOut: true that covers the kind is set to a non-empty value
	// that does not opt in, or annotations.optIn is set to a non-empty value
	// other than "enabled".
	OptInAll bool `json:"optInAll"`
	// Notifications are posted to chat and webhook sinks (notifications.go).
	Notifications FileNotifications `json:"notifications"`
	// SourceLifecycle says whether a source's creation and deletion restart
	// the workloads that read it optionally.
	SourceLifecycle FileSourceLifecycle `json:"sourceLifecycle"`
	// Metrics adds other controllers' metric names, so that their
	// dashboards and alerts keep working after a switch.
	Metrics FileMetrics `json:"metrics"`
	// IgnoreAnnotations are more source annotations that, set to "true",
	// make a source's changes restart nothing, beside annotations.ignore:
	// other controllers' (Reloader's reloader.stakater.com/ignore), so that
	// both keep working.
	IgnoreAnnotations []FileIgnoreAnnotation `json:"ignoreAnnotations"`
	// RestartWindows are the times restarts may happen (windows.go). A
	// workload picks one by name with annotations.window; the workloads of
	// a namespace a window's namespaceSelector selects have it unless they
	// pick another, or "none". A restart due outside its window waits for
	// the window's next opening.
	RestartWindows []FileRestartWindow `json:"restartWindows"`
	// MinIntervalAnnotations are more workload annotations read as its
	// minimum interval between restarts, beside annotations.minInterval:
	// other controllers' (Reloader's pause-period).
	MinIntervalAnnotations []FileMinIntervalAnnotation `json:"minIntervalAnnotations"`
}

// FileIgnoreAnnotation is a source annotation that, set to "true", makes
// the source's changes restart nothing (they are recorded).
type FileIgnoreAnnotation struct {
	Annotation string `json:"annotation"`
}

// FileMetrics are metrics exported beside the controller's own. They live as
// long as the process: changing them needs a restart of it.
type FileMetrics struct {
	// ReloaderCompatible also exports Reloader's
	// reloader_reload_executed_total{success}: restart patches that
	// succeeded ("true") or failed ("false").
	ReloaderCompatible bool `json:"reloaderCompatible"`
	// ReloaderByNamespace also exports
	// reloader_reload_executed_total_by_namespace{success,namespace}, as
	// Reloader does with METRICS_COUNT_BY_NAMESPACE=enabled. It needs
	// reloaderCompatible.
	ReloaderByNamespace bool `json:"reloaderByNamespace"`
}

// FileSourceLifecycle says what the creation and the deletion of a source
// do to the workloads reading it. Only readers for which the source is
// optional (listed, or every reference to it optional) are concerned: a
// required source's creation lets pods start that waited for it, and its
// deletion never restarts (new pods could not start; a Warning Event on
// each reader says so).
type FileSourceLifecycle struct {
	// RestartOnCreate: a source created after its readers' pods started
	// restarts them, so that the next pods read it (Reloader's
	// --reload-on-create). Off, the creation is recorded only.
	RestartOnCreate bool `json:"restartOnCreate"`
	// RestartOnDelete: a source deleted after its readers' pods started
	// restarts them, so that the next pods start without it (Reloader's
	// --reload-on-delete). Off, the deletion restarts nothing and the
	// recorded checksum is kept, so a re-creation with other data restarts.
	RestartOnDelete bool `json:"restartOnDelete"`
}

// FileOptInAnnotation opts a workload in when the workload's annotation
// Annotation has the value Value.
type FileOptInAnnotation struct {
	Annotation string `json:"annotation"`
	// Value opts in, compared ignoring case; empty means "true".
	Value string `json:"value"`
	// ParseBool: every value Go's strconv.ParseBool reads as true opts in
	// ("1", "t", "T", "TRUE", "true", "True"), as Reloader reads its auto
	// annotations; Value must then be left out.
	ParseBool bool `json:"parseBool"`
	// ReadFrom says where the annotation is read: workload (its metadata, the
	// default), podTemplate (the pod template's metadata, as Helm charts'
	// podAnnotations set it) or both (see Place).
	ReadFrom string `json:"readFrom"`
	// OptOut: with optInAll, this annotation set to a value that does not
	// opt in (e.g. "false") opts the workload out for the kinds it covers.
	OptOut bool `json:"optOut"`
	// Sources limits the references of the pod spec this opt-in covers to
	// these source kinds (sources[].name); empty covers every kind.
	Sources []string `json:"sources"`
	// SourceAnnotation, when set, lets only sources whose annotation of
	// this key is "true" restart the workload; changes of the others are
	// recorded, as for annotations.ignore.
	SourceAnnotation string `json:"sourceAnnotation"`
}

// FileSourceListAnnotation is a workload annotation listing sources of one
// kind, separated by commas: "NAME" in the workload's namespace, or
// "NAMESPACE/NAME". A listed source is read whole and is optional (the pods
// start without it).
type FileSourceListAnnotation struct {
	Annotation string `json:"annotation"`
	// Source is the kind of the listed sources (sources[].name).
	Source string `json:"source"`
	// OptIn: a list that names a source opts the workload in, for the
	// listed sources only (unless another opt-in covers its pod spec).
	// Otherwise the list counts only on a workload opted in another way.
	OptIn bool `json:"optIn"`
	// ReadFrom says where the annotation is read, as for optInAnnotations[].readFrom.
	ReadFrom string `json:"readFrom"`
	// Match says how an entry names sources: exact (the default), a NAME or
	// NAMESPACE/NAME; or regex, the anchored regular expression
	// ^(?:ENTRY)$ (Go's RE2 syntax) matched against the names of the
	// sources of its kind in the workload's namespace, as Reloader matches
	// its reload lists. An entry that is no regular expression is skipped,
	// and reported in a Warning Event on the workload.
	Match string `json:"match"`
}

// FileExcludeAnnotation is a workload annotation listing, separated by
// commas, names of sources of one kind in the workload's namespace whose
// changes restart it not. It is read on the workload's metadata only, as
// Reloader reads its exclude annotations.
type FileExcludeAnnotation struct {
	Annotation string `json:"annotation"`
	// Source is the kind of the listed sources (sources[].name).
	Source string `json:"source"`
}

// FileWaves are the settings of health-gated waves (README, "Fleet safety").
type FileWaves struct {
	// UnpacedUpTo: a change reaching at most this many workloads restarts
	// them at once.
	UnpacedUpTo int `json:"unpacedUpTo"`
	// FirstWave is the size of the first wave; each next one is Growth times
	// the previous (rounded up).
	FirstWave int     `json:"firstWave"`
	Growth    float64 `json:"growth"`
	// MaxInFlight caps the paced rollouts under way across the controller.
	MaxInFlight int `json:"maxInFlight"`
}

// FileBreaker holds a workload restarted more than Budget times within
// Window until its sources stay still for Quiet.
type FileBreaker struct {
	Budget int      `json:"budget"`
	Window Duration `json:"window"`
	Quiet  Duration `json:"quiet"`
}

// FileRollout says how a workload kind's rollout is followed after a restart.
type FileRollout struct {
	// Status names the rule reading the kind's status: deployment,
	// statefulset, daemonset, argo-rollout, conditions or none; empty means
	// the built-in rule of the resource (conditions for kinds it does not know).
	Status string `json:"status"`
	// ReadyConditions are the condition types the conditions rule reads.
	ReadyConditions []string `json:"readyConditions"`
	// Deadline bounds a rollout; empty means 10m.
	Deadline Duration `json:"deadline"`
}

// FileLeaderElection configures leader election on a Lease.
type FileLeaderElection struct {
	Enabled       bool     `json:"enabled"`
	Namespace     string   `json:"namespace"`
	LeaseName     string   `json:"leaseName"`
	LeaseDuration Duration `json:"leaseDuration"`
	RenewDeadline Duration `json:"renewDeadline"`
	RetryPeriod   Duration `json:"retryPeriod"`
}

// FileAnnotations are the annotation keys the controller reads and writes.
type FileAnnotations struct {
	// OptIn marks a workload as managed when its value is "enabled".
	OptIn            string `json:"optIn"`
	AppliedChecksums string `json:"appliedChecksums"`
	// RestartTimestamp is set in the pod template's annotations.
	RestartTimestamp string `json:"restartTimestamp"`
	// AppliedTemplateHash records the pod template the checksums were taken
	// against, so a template change (which rolls pods by itself) re-records
	// checksums instead of restarting a second time; not in xing's
	// controller, whose annotations are all kept.
	AppliedTemplateHash string `json:"appliedTemplateHash"`
	// Rollout records on the workload what its last restart delivered and
	// how its rollout ended; Hold records why a restart is held (package
	// record writes both).
	Rollout string `json:"rollout"`
	Hold    string `json:"hold"`
	// IgnoreSources, on a workload, names sources whose changes restart it
	// not: a comma-separated list ("configmap/NAME", or a NAME of any kind).
	IgnoreSources string `json:"ignoreSources"`
	// Ignore, on a source, set to "true", makes its changes restart nothing.
	Ignore string `json:"ignore"`
	// Release, on a source, set to a held change's ID, lets that change go on.
	Release string `json:"release"`
	// RestartStrategy, on a workload, picks one of its kind's
	// restart.byAnnotation strategies by their value.
	RestartStrategy string `json:"restartStrategy"`
	// Window, on a workload, names its restart window (restartWindows), or
	// "none" for no window, whatever its namespace's.
	Window string `json:"window"`
	// MinInterval, on a workload, is the least time between two of its
	// restarts, a Go duration such as "10m" (workloads[].minInterval when
	// absent).
	MinInterval string `json:"minInterval"`
}

// FileSourceKind is a watched source resource (ConfigMaps, Secrets, ...).
type FileSourceKind struct {
	// Name identifies the kind in references[].source and in checksum keys.
	Name     string `json:"name"`
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	// DataFields are the top-level fields holding the object's keys.
	// Left out with lifecycle: updatesOnly, whose data are its items.
	DataFields []string `json:"dataFields"`
	// Lifecycle says which events of the kind's objects are changes:
	// empty (every creation, update and deletion, as for ConfigMaps) or
	// updatesOnly (members.go): objects that another controller creates
	// and deletes with each pod, such as the CSI driver's
	// SecretProviderClassPodStatuses, whose creation and deletion must
	// restart nothing.
	Lifecycle string `json:"lifecycle"`
	// NameFrom is the path in the object to the name workloads reference
	// it by, e.g. status.secretProviderClassName; the objects of one
	// namespace with that name are the members of one source. Only with
	// lifecycle: updatesOnly, where it is required.
	NameFrom string `json:"nameFrom"`
	// Items are the object's data as a list of key and value pairs, e.g.
	// status.objects[*] with key id and value version. Only with
	// lifecycle: updatesOnly, where it is required.
	Items FileSourceItems `json:"items"`
	// EnvVarKind is the last part of the variable the envVar restart
	// strategy sets for a source of this kind, STAKATER_<NAME>_<KIND>
	// (Reloader's name); default: the kind's name in upper case, as
	// Reloader's CONFIGMAP and SECRET. Reloader names its CSI variables
	// SECRETPROVIDERCLASS.
	EnvVarKind string `json:"envVarKind"`
}

// FileSourceItems finds (key, value) pairs in an object: Path leads to the
// items (with [*] for each element of a list), Key and Value lead from an
// item to its key (a non-empty string) and its value (any value: its JSON
// is digested).
type FileSourceItems struct {
	Path  string `json:"path"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// FileWorkloadKind is a watched pod-template workload resource.
type FileWorkloadKind struct {
	Group           string `json:"group"`
	Version         string `json:"version"`
	Resource        string `json:"resource"`
	PodTemplatePath string `json:"podTemplatePath"`
	// NotRolledWhen lists conditions under which a change of the pod template
	// replaces no pods (a paused Deployment, an OnDelete StatefulSet); any
	// one that holds makes a restart a "RestartNotRolled" Warning Event.
	NotRolledWhen []FileCondition `json:"notRolledWhen"`
	// Rollout says how the kind's rollout is followed after a restart.
	Rollout FileRollout `json:"rollout"`
	// Restart says how a workload of the kind is restarted (strategy.go).
	Restart FileRestart `json:"restart"`
	// MinInterval is the least time between two restarts of a workload of
	// the kind, unless its annotation says otherwise; zero: none. Changes
	// inside it are merged into one restart when it ends.
	MinInterval Duration `json:"minInterval"`
}

// FileCondition holds when the value at Path equals Equals, or, written
// with NoElement instead of Equals, when no element of the list at Path
// matches NoElement.
type FileCondition struct {
	// Path leads from the workload object to a value, e.g. spec.paused.
	Path string `json:"path"`
	// Equals is a string, boolean or number.
	Equals Scalar `json:"equals"`
	// NoElement holds when no element of the list at Path has the value
	// Equals at Path (from the element): e.g. an OpenShift
	// DeploymentConfig whose spec.triggers has no element of type
	// ConfigChange rolls nothing on a template change. A missing list has
	// no element.
	NoElement FileElementCondition `json:"noElement"`
}

// FileElementCondition is what NoElement looks for in each element of a
// list: the value at Path, from the element, equal to Equals.
type FileElementCondition struct {
	Path   string `json:"path"`
	Equals Scalar `json:"equals"`
}

// set reports whether any of its fields was given.
func (e FileElementCondition) set() bool { return e.Path != "" || e.Equals.Set }

// Scalar is a string, boolean or number of the file; numbers are float64.
type Scalar struct {
	Value interface{}
	Set   bool
}

// DecodeValue implements valueDecoder.
func (s *Scalar) DecodeValue(v interface{}) error {
	switch x := v.(type) {
	case string, bool:
		s.Value, s.Set = x, true
		return nil
	}
	if f, ok := asFloat(v); ok {
		s.Value, s.Set = f, true
		return nil
	}
	return fmt.Errorf("must be a string, boolean or number, got %s", describe(v))
}

// MillisOrDuration is a duration written as a bare number of milliseconds
// or as a Go duration such as "250ms".
type MillisOrDuration time.Duration

// SecondsOrDuration is a duration written as a bare number of seconds or as
// a Go duration such as "500ms".
type SecondsOrDuration time.Duration

// Duration is a duration written as a Go duration string, e.g. "15s".
type Duration time.Duration

// DecodeValue implements valueDecoder.
func (d *MillisOrDuration) DecodeValue(v interface{}) error {
	x, err := numberOrDuration(v, time.Millisecond, "milliseconds", "250ms")
	*d = MillisOrDuration(x)
	return err
}

// DecodeValue implements valueDecoder.
func (d *SecondsOrDuration) DecodeValue(v interface{}) error {
	x, err := numberOrDuration(v, time.Second, "seconds", "500ms")
	*d = SecondsOrDuration(x)
	return err
}

// DecodeValue implements valueDecoder.
func (d *Duration) DecodeValue(v interface{}) error {
	if s, ok := v.(string); ok {
		if x, err := time.ParseDuration(s); err == nil {
			*d = Duration(x)
			return nil
		}
	}
	return fmt.Errorf("must be a Go duration like \"15s\", got %s", describe(v))
}

// numberOrDuration accepts numbers as strings too, because environment
// variables and flags only carry strings.
func numberOrDuration(v interface{}, unit time.Duration, unitName, example string) (time.Duration, error) {
	f, isNumber := asFloat(v)
	if s, ok := v.(string); ok {
		var err error
		if f, err = strconv.ParseFloat(s, 64); err == nil {
			isNumber = true
		} else if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
	}
	if isNumber {
		ns := f * float64(unit)
		if math.IsNaN(ns) || math.Abs(ns) >= math.MaxInt64 {
			return 0, fmt.Errorf("out of range: %s", describe(v))
		}
		return time.Duration(ns), nil
	}
	return 0, fmt.Errorf("must be a number of %s or a Go duration like %q, got %s", unitName, example, describe(v))
}
