package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// client-go's leader election refuses a renew deadline within this factor of
// the retry period; checking it here names the file keys instead.
const leaderElectionJitter = 1.2

// Bounds of the settings. Values outside them are never intended and would
// hurt: a check period of nanoseconds spins a core, a hundred million workers
// exhaust memory, unbounded QPS floods the API server, lease timings below a
// second make leadership flap. examples/config.yaml documents them.
const (
	minCheckPeriod   = 10 * time.Millisecond
	maxCheckPeriod   = time.Hour
	maxGracePeriod   = 24 * time.Hour
	maxWorkers       = 1000
	maxKubeAPIQPS    = 10000
	maxKubeAPIBurst  = 100000
	minLeaseDuration = time.Second
	maxLeaseDuration = 10 * time.Minute
	minRetryPeriod   = 100 * time.Millisecond
)

var errRequired = errors.New("required")

// compile validates a decoded file and builds the Config, reporting every
// problem to p. The Config is only meaningful when p stays empty.
func compile(f *File, p *problems) *Config {
	c := &Config{Settings: compileSettings(f, p), Annotations: f.Annotations}
	keys := checkAnnotations(f.Annotations, p)
	c.Namespaces = compileNamespaces("namespaces", f.Namespaces, p)
	c.WorkloadSelector = compileSelector("workloadSelector", f.WorkloadSelector, p)
	c.SourceSelector = compileSelector("sourceSelector", f.SourceSelector, p)
	if f.NamespaceSelector != "" {
		c.NamespaceSelector = compileSelector("namespaceSelector", f.NamespaceSelector, p)
	}
	c.IgnoredNamespaces = compileIgnoredNamespaces(f.IgnoredNamespaces, c.Namespaces, p)
	c.Sources = compileSources(f.Sources, p)
	c.SourceLifecycle = SourceLifecycle{RestartOnCreate: f.SourceLifecycle.RestartOnCreate,
		RestartOnDelete: f.SourceLifecycle.RestartOnDelete, AbsentUnknown: f.SourceSelector != ""}
	for _, k := range c.Sources {
		c.sourceKinds = append(c.sourceKinds, k.Name)
		if k.Members != nil {
			c.SourceLifecycle.UpdatesOnly = append(c.SourceLifecycle.UpdatesOnly, k.Name)
		}
	}
	c.Workloads = compileWorkloads(f.Workloads, p)
	c.Extractors = compileReferences(f.References, c.sourceKinds, p)
	c.OrderByResourceVersion = f.OrderByResourceVersion
	c.Waves = compileWaves(f.Waves, p)
	c.Breaker = compileBreaker(f.Breaker, p)
	c.OptIns, c.SourceLists, c.Excludes, c.IgnoreAnnotations = compileOptIns(f, c.sourceKinds, keys, p)
	c.OptInAll = f.OptInAll
	c.Sinks = compileNotifications(f.Notifications, p)
	c.Windows = compileWindows(f.RestartWindows, p)
	for i, a := range f.MinIntervalAnnotations {
		checkName(p, fmt.Sprintf("minIntervalAnnotations[%d].annotation", i), a.Annotation, content.IsQualifiedName)
		c.MinIntervalAnnotations = append(c.MinIntervalAnnotations, a.Annotation)
	}
	return c
}

// compileOptIns checks the opt-in, source-list, exclude and ignore annotations.
// Their keys must differ from each other and from the annotations of
// annotations.* (seen maps those to their paths: checkAnnotations), which it
// adds them to: a key with two meanings would opt workloads in or out by
// accident. That also keeps them apart from annotations.restartTimestamp,
// the one annotation restarts write into pod templates, so a restart never
// changes what a workload opts into.
func compileOptIns(f *File, known []string, seen map[string]string, p *problems) ([]OptIn, []SourceList, []Exclude, []string) {
	checkKnown := func(path, kind string) {
		if kind == "" {
			p.add(path, errRequired)
		} else {
			checkKnownKind(p, path, kind, known)
		}
	}
	checkKey := func(path, key string) {
		checkName(p, path, key, content.IsQualifiedName)
		if other, dup := seen[key]; dup && key != "" {
			p.addf(path, "must differ from %s (both %q)", other, key)
		} else {
			seen[key] = path
		}
	}
	optIns := make([]OptIn, len(f.OptInAnnotations))
	for i, o := range f.OptInAnnotations {
		path := fmt.Sprintf("optInAnnotations[%d]", i)
		checkKey(path+".annotation", o.Annotation)
		optIns[i] = OptIn{Annotation: o.Annotation, Value: o.Value, ParseBool: o.ParseBool,
			SourceAnnotation: o.SourceAnnotation, ReadFrom: compilePlace(path+".readFrom", o.ReadFrom, p), OptOut: o.OptOut}
		switch {
		case o.ParseBool && o.Value != "":
			p.addf(path+".value", "must be left out with parseBool: true, which opts in on every value strconv.ParseBool reads as true; got %q", o.Value)
		case o.ParseBool:
		case o.Value == "":
			optIns[i].Value = "true"
		}
		for j, kind := range o.Sources {
			checkKnown(fmt.Sprintf("%s.sources[%d]", path, j), kind)
		}
		if len(o.Sources) > 0 {
			optIns[i].Kinds = o.Sources
		}
		if o.SourceAnnotation != "" {
			checkName(p, path+".sourceAnnotation", o.SourceAnnotation, content.IsQualifiedName)
			for _, k := range annotationKeys(f.Annotations) {
				if k.value == o.SourceAnnotation {
					p.addf(path+".sourceAnnotation", "must differ from %s (both %q)", k.path, k.value)
				}
			}
		}
	}
	lists := make([]SourceList, len(f.SourceListAnnotations))
	for i, l := range f.SourceListAnnotations {
		path := fmt.Sprintf("sourceListAnnotations[%d]", i)
		checkKey(path+".annotation", l.Annotation)
		checkKnown(path+".source", l.Source)
		lists[i] = SourceList{Annotation: l.Annotation, Kind: l.Source, OptIn: l.OptIn, ReadFrom: compilePlace(path+".readFrom", l.ReadFrom, p)}
		switch l.Match {
		case "", MatchExact:
		case MatchRegex:
			lists[i].Regex = true
		default:
			p.addf(path+".match", "must be %s or %s, got %q", MatchExact, MatchRegex, l.Match)
		}
	}
	ignores := make([]string, len(f.IgnoreAnnotations))
	for i, a := range f.IgnoreAnnotations {
		checkKey(fmt.Sprintf("ignoreAnnotations[%d].annotation", i), a.Annotation)
		ignores[i] = a.Annotation
	}
	excludes := make([]Exclude, len(f.ExcludeAnnotations))
	for i, e := range f.ExcludeAnnotations {
		path := fmt.Sprintf("excludeAnnotations[%d]", i)
		checkKey(path+".annotation", e.Annotation)
		checkKnown(path+".source", e.Source)
		excludes[i] = Exclude{Annotation: e.Annotation, Kind: e.Source}
	}
	return optIns, lists, excludes, ignores
}

// compilePlace reads where an annotation is read; empty means the workload.
func compilePlace(path, on string, p *problems) Place {
	switch Place(on) {
	case "":
		return OnWorkload
	case OnWorkload, OnPodTemplate, OnBoth:
		return Place(on)
	}
	p.addf(path, "must be %s, %s or %s, got %q", OnWorkload, OnPodTemplate, OnBoth, on)
	return OnWorkload
}

// Bounds of the fleet-safety settings.
const (
	maxFleetCount  = 100000
	maxGrowth      = 10
	maxBudget      = 1000
	minWindow      = time.Second
	maxWindow      = 24 * time.Hour
	minDeadline    = time.Second
	maxDeadline    = 24 * time.Hour
	maxQuietPeriod = 24 * time.Hour
)

func compileWaves(f FileWaves, p *problems) Waves {
	checkRange(p, "waves.unpacedUpTo", f.UnpacedUpTo, 0, maxFleetCount)
	checkRange(p, "waves.firstWave", f.FirstWave, 1, maxFleetCount)
	if !(f.Growth >= 1 && f.Growth <= maxGrowth) { // also false for NaN
		p.addf("waves.growth", "must be between 1 and %d, got %v", maxGrowth, f.Growth)
	}
	checkRange(p, "waves.maxInFlight", f.MaxInFlight, 1, maxFleetCount)
	return f
}

func compileBreaker(f FileBreaker, p *problems) Breaker {
	b := Breaker{Budget: f.Budget, Window: time.Duration(f.Window), Quiet: time.Duration(f.Quiet)}
	checkRange(p, "breaker.budget", b.Budget, 0, maxBudget)
	checkDuration(p, "breaker.window", b.Window, minWindow, maxWindow)
	checkDuration(p, "breaker.quiet", b.Quiet, 0, maxQuietPeriod)
	return b
}

func compileRollout(path string, gvr schema.GroupVersionResource, f FileRollout, p *problems) rollout.Rule {
	r := rollout.Rule{Kind: rollout.Kind(f.Status), ReadyConditions: f.ReadyConditions, Deadline: time.Duration(f.Deadline)}
	if f.Status == "" {
		r.Kind = rollout.BuiltinKind(gvr)
	} else {
		checkOneOf(p, path+".status", r.Kind, rollout.Kinds)
	}
	if len(f.ReadyConditions) > 0 && r.Kind != rollout.KindConditions {
		p.addf(path+".readyConditions", "only the conditions rule reads them; this kind's rule is %s", r.Kind)
	}
	for i, c := range f.ReadyConditions {
		if c == "" {
			p.addf(fmt.Sprintf("%s.readyConditions[%d]", path, i), "must not be empty")
		}
	}
	if r.Deadline != 0 {
		checkDuration(p, path+".deadline", r.Deadline, minDeadline, maxDeadline)
	} else {
		r.Deadline = rollout.DefaultDeadline
	}
	return r
}

func compileSettings(f *File, p *problems) Settings {
	s := Settings{
		CheckPeriod:        time.Duration(f.RestartCheckPeriod),
		GracePeriod:        time.Duration(f.RestartGracePeriod),
		IgnoredErrors:      f.IgnoredErrors,
		MetricsAddress:     f.MetricsAddress,
		KubeAPIQPS:         float32(f.KubeAPIQPS),
		KubeAPIBurst:       f.KubeAPIBurst,
		Workers:            f.Workers,
		EnableProfiling:    f.EnableProfiling,
		DryRun:             f.DryRun,
		ChecksumKeySecret:  f.ChecksumKeySecret,
		LogFormat:          f.LogFormat,
		Verbose:            f.Verbose,
		LeaderElect:        f.LeaderElection.Enabled,
		LeaseNamespace:     f.LeaderElection.Namespace,
		LeaseName:          f.LeaderElection.LeaseName,
		LeaseDuration:      time.Duration(f.LeaderElection.LeaseDuration),
		LeaseRenewDeadline: time.Duration(f.LeaderElection.RenewDeadline),
		LeaseRetryPeriod:   time.Duration(f.LeaderElection.RetryPeriod),

		ReloaderMetrics:            f.Metrics.ReloaderCompatible,
		ReloaderMetricsByNamespace: f.Metrics.ReloaderByNamespace,
	}
	if s.ReloaderMetricsByNamespace && !s.ReloaderMetrics {
		p.addf("metrics.reloaderByNamespace", "needs metrics.reloaderCompatible: true")
	}
	checkDuration(p, "restartCheckPeriod", s.CheckPeriod, minCheckPeriod, maxCheckPeriod)
	checkDuration(p, "restartGracePeriod", s.GracePeriod, 0, maxGracePeriod)
	for i, e := range s.IgnoredErrors {
		if e == "" {
			// Never intended; IGNORED_ERRORS drops empty parts for the same reason.
			p.addf(fmt.Sprintf("ignoredErrors[%d]", i), "must not be empty")
		}
	}
	checkAddress(p, "metricsAddress", s.MetricsAddress)
	if !(s.KubeAPIQPS > 0 && s.KubeAPIQPS <= maxKubeAPIQPS) { // also false for NaN
		p.addf("kubeAPIQPS", "must be more than 0 and at most %d", maxKubeAPIQPS)
	}
	checkRange(p, "kubeAPIBurst", s.KubeAPIBurst, 1, maxKubeAPIBurst)
	checkRange(p, "workers", s.Workers, 1, maxWorkers)
	if s.LogFormat != "text" && s.LogFormat != "json" {
		p.addf("logFormat", "must be text or json, got %q", s.LogFormat)
	}
	checkName(p, "leaderElection.namespace", s.LeaseNamespace, content.IsDNS1123Label)
	checkName(p, "leaderElection.leaseName", s.LeaseName, content.IsDNS1123Subdomain)
	checkName(p, "checksumKeySecret", s.ChecksumKeySecret, content.IsDNS1123Subdomain)
	lease := checkDuration(p, "leaderElection.leaseDuration", s.LeaseDuration, minLeaseDuration, maxLeaseDuration)
	retry := checkDuration(p, "leaderElection.retryPeriod", s.LeaseRetryPeriod, minRetryPeriod, maxLeaseDuration)
	switch {
	case !lease || !retry:
	case s.LeaseRenewDeadline <= 0:
		p.addf("leaderElection.renewDeadline", "must be positive")
	case s.LeaseRenewDeadline >= s.LeaseDuration:
		p.addf("leaderElection.renewDeadline", "must be less than leaseDuration (%s)", s.LeaseDuration)
	case float64(s.LeaseRenewDeadline) <= leaderElectionJitter*float64(s.LeaseRetryPeriod):
		p.addf("leaderElection.retryPeriod", "must be less than renewDeadline (%s) / %v", s.LeaseRenewDeadline, leaderElectionJitter)
	}
	return s
}

// checkDuration reports a duration outside [lo, hi] and returns whether it is inside.
func checkDuration(p *problems, path string, d, lo, hi time.Duration) bool {
	if d < lo || d > hi {
		p.addf(path, "must be between %s and %s, got %s", lo, hi, d)
		return false
	}
	return true
}

// checkRange reports an integer outside [lo, hi].
func checkRange(p *problems, path string, n, lo, hi int) {
	if n < lo || n > hi {
		p.addf(path, "must be between %d and %d, got %d", lo, hi, n)
	}
}

// checkOneOf reports a value that is not one of names, and returns whether
// it is.
func checkOneOf[T ~string](p *problems, path string, value T, names []T) bool {
	if slices.Contains(names, value) {
		return true
	}
	list := make([]string, len(names))
	for i, n := range names {
		list[i] = string(n)
	}
	p.addf(path, "must be one of %s, got %q", strings.Join(list, ", "), value)
	return false
}

// checkKnownKind reports a kind that is not one of known, the names of
// sources. A source kind that did not decode may be the one named: nothing
// is reported then.
func checkKnownKind(p *problems, path, kind string, known []string) {
	if !p.failedWithin("sources") && !slices.Contains(known, kind) {
		p.addf(path, "unknown source kind %q (known: %s)", kind, strings.Join(known, ", "))
	}
}

// checkAddress reports an address the metrics server could not listen on:
// checking here makes a bad port a configuration error (exit 2), not a
// failure to start (exit 1).
func checkAddress(p *problems, path, address string) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		p.addf(path, "must be host:port: %w", err)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.addf(path, "port must be a number from 0 to 65535, got %q", port)
	}
}

// checkName reports an empty value as required and an invalid one with the
// validator's own explanation.
func checkName(p *problems, path, value string, valid func(string) []string) {
	if value == "" {
		p.add(path, errRequired)
		return
	}
	if msgs := valid(value); len(msgs) > 0 {
		p.addf(path, "invalid %q: %s", value, strings.Join(msgs, "; "))
	}
}

// checkAnnotations checks the keys of annotations.* and returns where each
// is in the file.
func checkAnnotations(a FileAnnotations, p *problems) map[string]string {
	// Each key has one meaning: the checksums annotation equal to the opt-in
	// key, say, would opt every workload out with its first write.
	seen := map[string]string{}
	for _, k := range annotationKeys(a) {
		checkName(p, k.path, k.value, content.IsQualifiedName)
		if other, dup := seen[k.value]; dup && k.value != "" {
			p.addf(k.path, "must differ from %s (both %q)", other, k.value)
		}
		seen[k.value] = k.path
	}
	return seen
}

type annotationKey struct{ path, value string }

// annotationKeys are the keys of annotations.*, with their places in the file.
func annotationKeys(a FileAnnotations) []annotationKey {
	return []annotationKey{
		{"annotations.optIn", a.OptIn},
		{"annotations.appliedChecksums", a.AppliedChecksums},
		{"annotations.restartTimestamp", a.RestartTimestamp},
		{"annotations.appliedTemplateHash", a.AppliedTemplateHash},
		{"annotations.rollout", a.Rollout},
		{"annotations.hold", a.Hold},
		{"annotations.ignoreSources", a.IgnoreSources},
		{"annotations.ignore", a.Ignore},
		{"annotations.release", a.Release},
		{"annotations.restartStrategy", a.RestartStrategy},
		{"annotations.window", a.Window},
		{"annotations.minInterval", a.MinInterval},
	}
}

// compileNamespaces checks the namespaces listed at field: valid names,
// once each.
func compileNamespaces(field string, namespaces []string, p *problems) []string {
	seen := map[string]int{}
	for i, ns := range namespaces {
		path := fmt.Sprintf("%s[%d]", field, i)
		checkName(p, path, ns, content.IsDNS1123Label)
		if j, dup := seen[ns]; dup {
			p.addf(path, "duplicate namespace %q (also %s[%d])", ns, field, j)
		} else {
			seen[ns] = i
		}
	}
	return namespaces
}

// compileSelector parses a label selector; empty selects everything.
func compileSelector(path, s string, p *problems) labels.Selector {
	if s == "" {
		return labels.Everything()
	}
	sel, err := labels.Parse(s)
	if err != nil {
		p.add(path, err)
		return labels.Everything()
	}
	return sel
}

// compileIgnoredNamespaces checks the ignored namespaces as namespaces are
// checked, and that namespaces lists none of them (watched and ignored at
// once). Problems are sorted by path, stably, so each name's come in the
// same order as when one loop made them all.
func compileIgnoredNamespaces(ignored, watched []string, p *problems) []string {
	compileNamespaces("ignoredNamespaces", ignored, p)
	for i, ns := range ignored {
		if j := slices.Index(watched, ns); j >= 0 {
			p.addf(fmt.Sprintf("ignoredNamespaces[%d]", i), "namespace %q is also in namespaces[%d]: it cannot be both watched and ignored", ns, j)
		}
	}
	return ignored
}

func compileSources(kinds []FileSourceKind, p *problems) []SourceKind {
	if len(kinds) == 0 {
		p.addf("sources", "at least one source kind is required")
	}
	names := map[string]int{}
	gvrs := map[schema.GroupVersionResource]int{}
	out := make([]SourceKind, len(kinds))
	for i, k := range kinds {
		path := fmt.Sprintf("sources[%d]", i)
		// The name is a segment of checksum keys "NAME/NAMESPACE/OBJECT".
		checkName(p, path+".name", k.Name, content.IsDNS1123Label)
		if j, dup := names[k.Name]; dup && k.Name != "" {
			p.addf(path+".name", "duplicate source kind %q (also sources[%d])", k.Name, j)
		} else {
			names[k.Name] = i
		}
		gvr := checkGVR(p, "sources", i, gvrs, k.Group, k.Version, k.Resource)
		members := compileMembers(path, k, p)
		if len(k.DataFields) == 0 && k.Lifecycle == "" {
			p.add(path+".dataFields", errRequired)
		}
		for j, field := range k.DataFields {
			if field == "" {
				p.addf(fmt.Sprintf("%s.dataFields[%d]", path, j), "must not be empty")
			}
		}
		out[i] = SourceKind{Name: k.Name, GVR: gvr, DataFields: k.DataFields, Members: members,
			EnvVarKind: compileEnvVarKind(path+".envVarKind", k.Name, k.EnvVarKind, p)}
	}
	return out
}

func compileWorkloads(kinds []FileWorkloadKind, p *problems) []WorkloadKind {
	if len(kinds) == 0 {
		p.addf("workloads", "at least one workload kind is required")
	}
	gvrs := map[schema.GroupVersionResource]int{}
	out := make([]WorkloadKind, len(kinds))
	for i, k := range kinds {
		path := fmt.Sprintf("workloads[%d]", i)
		gvr := checkGVR(p, "workloads", i, gvrs, k.Group, k.Version, k.Resource)
		out[i] = WorkloadKind{GVR: gvr, Rollout: compileRollout(path+".rollout", gvr, k.Rollout, p)}
		tp, ok := requiredPath(p, path+".podTemplatePath", k.PodTemplatePath, "a workload has one pod template")
		if !ok {
			continue
		}
		out[i].PodTemplatePath = tp
		out[i].NotRolledWhen = compileConditions(path+".notRolledWhen", k.NotRolledWhen, p)
		out[i].Restart = compileRestart(path+".restart", k.Restart, tp, p)
		if out[i].MinInterval = time.Duration(k.MinInterval); out[i].MinInterval != 0 {
			checkDuration(p, path+".minInterval", out[i].MinInterval, minMinInterval, maxMinInterval)
		}
	}
	return out
}

func compileConditions(path string, conds []FileCondition, p *problems) []Condition {
	var out []Condition
	for j, c := range conds {
		at := fmt.Sprintf("%s[%d]", path, j)
		cp, ok := requiredPath(p, at+".path", c.Path, conditionWhy)
		switch {
		case c.NoElement.set() && c.Equals.Set:
			p.addf(at, "has both equals and noElement; give one")
			continue
		case c.NoElement.set():
			ep, eok := requiredPath(p, at+".noElement.path", c.NoElement.Path, conditionWhy)
			if !c.NoElement.Equals.Set {
				p.add(at+".noElement.equals", errRequired)
				eok = false
			}
			if ok && eok {
				out = append(out, Condition{Path: cp, Element: &Condition{Path: ep, Equals: c.NoElement.Equals.Value}})
			}
		case !c.Equals.Set:
			p.addf(at+".equals", "required (or noElement)")
		case ok:
			out = append(out, Condition{Path: cp, Equals: c.Equals.Value})
		}
	}
	return out
}

// Why paths have no [*] (onePath): a condition's, a restart strategy's.
const (
	conditionWhy = "a condition reads one value"
	fieldWhy     = "it names one field"
)

// requiredPath is onePath for a path that must be given.
func requiredPath(p *problems, at, value, why string) (refs.Path, bool) {
	if value == "" {
		p.add(at, errRequired)
		return refs.Path{}, false
	}
	return onePath(p, at, value, why)
}

// onePath parses a path that reaches one value; why says why, to a path
// with [*].
func onePath(p *problems, at, value, why string) (refs.Path, bool) {
	rp, err := refs.ParsePath(value)
	if err == nil && rp.HasWildcard() {
		err = errors.New("must not contain [*]: " + why)
	}
	if err != nil {
		p.add(at, err)
		return refs.Path{}, false
	}
	return rp, true
}

// checkGVR checks the parts of the resource of entry i of a list the way
// the API server names them, so that a typo fails here rather than as a
// watch that never syncs, and that no earlier entry has it (seen maps each
// resource to the first entry with it).
func checkGVR(p *problems, list string, i int, seen map[schema.GroupVersionResource]int, group, version, resource string) schema.GroupVersionResource {
	path := fmt.Sprintf("%s[%d]", list, i)
	ok := true
	fail := func(field, format string, args ...interface{}) {
		p.addf(path+"."+field, format, args...)
		ok = false
	}
	if group != "" && len(content.IsDNS1123Subdomain(group)) > 0 {
		fail("group", "must be empty (the core group) or a DNS subdomain such as apps, got %q", group)
	}
	if version == "" {
		fail("version", "required")
	} else if len(content.IsDNS1123Label(version)) > 0 {
		fail("version", "must be a lowercase version such as v1, got %q", version)
	}
	if resource == "" {
		fail("resource", "required")
	} else if len(content.IsDNS1123Label(resource)) > 0 {
		fail("resource", "must be a lowercase plural resource name, got %q", resource)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
	if j, dup := seen[gvr]; dup && ok {
		p.addf(path, "duplicate resource %s (also %s[%d])", gvr, list, j)
	} else {
		seen[gvr] = i
	}
	return gvr
}

func compileReferences(specs []refs.Spec, known []string, p *problems) []*refs.Extractor {
	if len(specs) == 0 {
		p.addf("references", "at least one reference form is required")
	}
	out := make([]*refs.Extractor, 0, len(specs))
	for i, spec := range specs {
		path := fmt.Sprintf("references[%d]", i)
		if spec.Source != "" {
			checkKnownKind(p, path+".source", spec.Source, known)
		}
		e, err := refs.Compile(spec)
		if err != nil {
			addRefsErrors(p, path, err)
			continue
		}
		out = append(out, e)
	}
	return out
}

// addRefsErrors reports the errors package refs joined in err, each under
// path and the field it names, if any.
func addRefsErrors(p *problems, path string, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		var fe *refs.FieldError
		if errors.As(err, &fe) {
			p.add(path+"."+fe.Field, fe.Err)
		} else {
			p.add(path, err)
		}
	}
}
