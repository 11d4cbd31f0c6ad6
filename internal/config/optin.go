package config

import (
	"slices"

	"github.com/restart-controller/restart-controller/internal/optin"
)

// The opt-in rules are read by package optin; config compiles them
// (compileOptIns) and names their types for the config's users.
type (
	Place               = optin.Place
	OptIn               = optin.OptIn
	SourceList          = optin.SourceList
	Exclude             = optin.Exclude
	WorkloadAnnotations = optin.WorkloadAnnotations
	Coverage            = optin.Coverage
	ListedSource        = optin.ListedSource
	ListPattern         = optin.ListPattern
	ExcludedSource      = optin.ExcludedSource
)

// Where annotations are read, and how source lists match (optin).
const (
	OnWorkload    = optin.OnWorkload
	OnPodTemplate = optin.OnPodTemplate
	OnBoth        = optin.OnBoth
	MatchExact    = optin.MatchExact
	MatchRegex    = optin.MatchRegex
)

// OptInRules are the configuration's opt-in rules, as package optin reads
// them. They are made from Config's fields on each call (a few words
// copied), so that no second copy of the rules can differ from the fields.
func (c *Config) OptInRules() optin.Rules {
	return optin.Rules{Annotation: c.Annotations.OptIn, OptIns: c.OptIns, SourceLists: c.SourceLists, Excludes: c.Excludes,
		All: c.OptInAll, Kinds: c.sourceKinds, Namespaces: c.Namespaces}
}

// WorkloadAnnotationsOf returns the annotations of a workload object of the
// kind and of its pod template. The pod template's are read only when some
// annotation is read there, so that workloads' caches do not copy them for
// nothing; they are nil when the object has no pod template.
func (c *Config) WorkloadAnnotationsOf(kind WorkloadKind, obj map[string]interface{}, workload map[string]string) WorkloadAnnotations {
	a := WorkloadAnnotations{Workload: workload}
	if !c.OptInRules().ReadsPodTemplate() {
		return a
	}
	template, ok := kind.PodTemplatePath.Object(obj)
	if !ok {
		return a
	}
	metadata, _ := template["metadata"].(map[string]interface{})
	raw, _ := metadata["annotations"].(map[string]interface{})
	if len(raw) == 0 {
		return a
	}
	a.PodTemplate = make(map[string]string, len(raw))
	for k, v := range raw {
		// The API server keeps annotation values strings; anything else
		// reads as absent rather than as a value it never had.
		if s, ok := v.(string); ok {
			a.PodTemplate[k] = s
		}
	}
	return a
}

// SourceAnnotations are the source annotations decisions read: the ignore
// annotations (annotations.ignore and ignoreAnnotations), the release
// annotation, and those opt-ins require.
func (c *Config) SourceAnnotations() []string {
	keys := append([]string{c.Annotations.Ignore, c.Annotations.Release}, c.IgnoreAnnotations...)
	for _, o := range c.OptIns {
		if o.SourceAnnotation != "" && !slices.Contains(keys, o.SourceAnnotation) {
			keys = append(keys, o.SourceAnnotation)
		}
	}
	return keys
}
