package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/refs"
)

// client-go's leader election refuses a renew deadline within this factor of
// the retry period; checking it here names the file keys instead.
const leaderElectionJitter = 1.2

var errRequired = errors.New("required")

// compile validates a decoded file and builds the Config, reporting every
// problem to p. The Config is only meaningful when p stays empty.
func compile(f *File, p *problems) *Config {
	c := &Config{
		Settings:    compileSettings(f, p),
		Annotations: compileAnnotations(f.Annotations, p),
		Namespaces:  compileNamespaces(f.Namespaces, p),
	}
	c.WorkloadSelector = labels.Everything()
	if f.WorkloadSelector != "" {
		sel, err := labels.Parse(f.WorkloadSelector)
		if err != nil {
			p.add("workloadSelector", err)
		} else {
			c.WorkloadSelector = sel
		}
	}
	c.Sources = compileSources(f.Sources, p)
	c.Workloads = compileWorkloads(f.Workloads, p)
	c.Extractors = compileReferences(f.References, f.Sources, p)
	c.OrderByResourceVersion = f.OrderByResourceVersion
	return c
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
		LogFormat:          f.LogFormat,
		Verbose:            f.Verbose,
		LeaderElect:        f.LeaderElection.Enabled,
		LeaseNamespace:     f.LeaderElection.Namespace,
		LeaseName:          f.LeaderElection.LeaseName,
		LeaseDuration:      time.Duration(f.LeaderElection.LeaseDuration),
		LeaseRenewDeadline: time.Duration(f.LeaderElection.RenewDeadline),
		LeaseRetryPeriod:   time.Duration(f.LeaderElection.RetryPeriod),
	}
	if s.CheckPeriod <= 0 {
		p.addf("restartCheckPeriod", "must be positive")
	}
	if s.GracePeriod < 0 {
		p.addf("restartGracePeriod", "must not be negative")
	}
	for i, e := range s.IgnoredErrors {
		if e == "" {
			// Never intended; IGNORED_ERRORS drops empty parts for the same reason.
			p.addf(fmt.Sprintf("ignoredErrors[%d]", i), "must not be empty")
		}
	}
	if _, _, err := net.SplitHostPort(s.MetricsAddress); err != nil {
		p.addf("metricsAddress", "must be host:port: %w", err)
	}
	if !(s.KubeAPIQPS > 0) {
		p.addf("kubeAPIQPS", "must be positive")
	}
	if s.KubeAPIBurst < 1 {
		p.addf("kubeAPIBurst", "must be at least 1")
	}
	if s.Workers < 1 {
		p.addf("workers", "must be at least 1")
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		p.addf("logFormat", "must be text or json, got %q", s.LogFormat)
	}
	checkName(p, "leaderElection.namespace", s.LeaseNamespace, content.IsDNS1123Label)
	checkName(p, "leaderElection.leaseName", s.LeaseName, content.IsDNS1123Subdomain)
	switch {
	case s.LeaseDuration <= 0:
		p.addf("leaderElection.leaseDuration", "must be positive")
	case s.LeaseRenewDeadline <= 0:
		p.addf("leaderElection.renewDeadline", "must be positive")
	case s.LeaseRetryPeriod <= 0:
		p.addf("leaderElection.retryPeriod", "must be positive")
	case s.LeaseRenewDeadline >= s.LeaseDuration:
		p.addf("leaderElection.renewDeadline", "must be less than leaseDuration (%s)", s.LeaseDuration)
	case float64(s.LeaseRenewDeadline) <= leaderElectionJitter*float64(s.LeaseRetryPeriod):
		p.addf("leaderElection.retryPeriod", "must be less than renewDeadline (%s) / %v", s.LeaseRenewDeadline, leaderElectionJitter)
	}
	return s
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

func compileAnnotations(a FileAnnotations, p *problems) Annotations {
	checkName(p, "annotations.optIn", a.OptIn, content.IsQualifiedName)
	checkName(p, "annotations.appliedChecksums", a.AppliedChecksums, content.IsQualifiedName)
	checkName(p, "annotations.restartTimestamp", a.RestartTimestamp, content.IsQualifiedName)
	checkName(p, "annotations.appliedTemplateHash", a.AppliedTemplateHash, content.IsQualifiedName)
	return Annotations{OptIn: a.OptIn, AppliedChecksums: a.AppliedChecksums, RestartTimestamp: a.RestartTimestamp,
		AppliedTemplateHash: a.AppliedTemplateHash}
}

func compileNamespaces(namespaces []string, p *problems) []string {
	seen := map[string]int{}
	for i, ns := range namespaces {
		path := fmt.Sprintf("namespaces[%d]", i)
		checkName(p, path, ns, content.IsDNS1123Label)
		if j, dup := seen[ns]; dup {
			p.addf(path, "duplicate namespace %q (also namespaces[%d])", ns, j)
		} else {
			seen[ns] = i
		}
	}
	return namespaces
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
		gvr, ok := checkGVR(p, path, k.Group, k.Version, k.Resource)
		if j, dup := gvrs[gvr]; dup && ok {
			p.addf(path, "duplicate resource %s (also sources[%d])", gvr, j)
		} else {
			gvrs[gvr] = i
		}
		if len(k.DataFields) == 0 {
			p.add(path+".dataFields", errRequired)
		}
		for j, field := range k.DataFields {
			if field == "" {
				p.addf(fmt.Sprintf("%s.dataFields[%d]", path, j), "must not be empty")
			}
		}
		out[i] = SourceKind{Name: k.Name, GVR: gvr, DataFields: k.DataFields}
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
		gvr, ok := checkGVR(p, path, k.Group, k.Version, k.Resource)
		if j, dup := gvrs[gvr]; dup && ok {
			p.addf(path, "duplicate resource %s (also workloads[%d])", gvr, j)
		} else {
			gvrs[gvr] = i
		}
		out[i] = WorkloadKind{GVR: gvr}
		if k.PodTemplatePath == "" {
			p.add(path+".podTemplatePath", errRequired)
			continue
		}
		tp, err := refs.ParsePath(k.PodTemplatePath)
		if err == nil && tp.HasWildcard() {
			err = errors.New("must not contain [*]: a workload has one pod template")
		}
		if err != nil {
			p.add(path+".podTemplatePath", err)
			continue
		}
		out[i].PodTemplatePath = tp
		out[i].NotRolledWhen = compileConditions(path+".notRolledWhen", k.NotRolledWhen, p)
	}
	return out
}

func compileConditions(path string, conds []FileCondition, p *problems) []Condition {
	var out []Condition
	for j, c := range conds {
		at := fmt.Sprintf("%s[%d]", path, j)
		if !c.Equals.Set {
			p.add(at+".equals", errRequired)
		}
		if c.Path == "" {
			p.add(at+".path", errRequired)
			continue
		}
		cp, err := refs.ParsePath(c.Path)
		if err == nil && cp.HasWildcard() {
			err = errors.New("must not contain [*]: a condition reads one value")
		}
		if err != nil {
			p.add(at+".path", err)
			continue
		}
		out = append(out, Condition{Path: cp, Equals: c.Equals.Value})
	}
	return out
}

// checkGVR checks the parts of a resource the way the API server names them,
// so that a typo fails here rather than as a watch that never syncs.
func checkGVR(p *problems, path, group, version, resource string) (schema.GroupVersionResource, bool) {
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
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, ok
}

func compileReferences(specs []refs.Spec, kinds []FileSourceKind, p *problems) []*refs.Extractor {
	if len(specs) == 0 {
		p.addf("references", "at least one reference form is required")
	}
	known := make([]string, len(kinds))
	for i, k := range kinds {
		known[i] = k.Name
	}
	// A source kind that did not decode may be the one a reference names.
	checkKnown := !p.failedWithin("sources")
	out := make([]*refs.Extractor, 0, len(specs))
	for i, spec := range specs {
		path := fmt.Sprintf("references[%d]", i)
		if checkKnown && spec.Source != "" && !slices.Contains(known, spec.Source) {
			p.addf(path+".source", "unknown source kind %q (known: %s)", spec.Source, strings.Join(known, ", "))
		}
		e, err := refs.Compile(spec)
		if err != nil {
			for _, err := range unjoin(err) {
				var fe *refs.FieldError
				if errors.As(err, &fe) {
					p.add(path+"."+fe.Field, fe.Err)
				} else {
					p.add(path, err)
				}
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
