package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/refs"
)

// StrategyName names how a restart is carried out (workloads[].restart).
type StrategyName string

const (
	// TemplateAnnotation writes the restart time into the pod template's
	// annotations (annotations.restartTimestamp): the workload's own
	// controller rolls its pods as for any template change. The default.
	TemplateAnnotation StrategyName = "templateAnnotation"
	// TimestampAt writes the restart time, RFC 3339 in seconds, at a field of
	// the workload (Argo Rollouts: spec.restartAt), whose controller then
	// replaces the pods without a template change.
	TimestampAt StrategyName = "timestampAt"
	// RunNow creates a Job now from the workload's Job template (CronJobs:
	// spec.jobTemplate), as `kubectl create job --from=cronjob/NAME` does.
	RunNow StrategyName = "runNow"
	// Recreate deletes the workload and creates it again from what it was
	// (Jobs, which cannot be re-run otherwise). Only by configuration.
	Recreate StrategyName = "recreate"
	// EnvVar sets Reloader's variable, STAKATER_<NAME>_<KIND>, to the
	// changed source's checksum in the containers that read the source
	// (Reloader's --reload-strategy env-vars): the kind's controller rolls
	// the pods as for any template change. Only by configuration: it
	// changes the containers, which GitOps tools compare.
	EnvVar StrategyName = "envVar"
)

// StrategyNames lists every strategy, for validation and error messages.
var StrategyNames = []StrategyName{TemplateAnnotation, TimestampAt, RunNow, Recreate, EnvVar}

// EnvVarPrefix begins every variable the envVar strategy sets, as
// Reloader's do.
const EnvVarPrefix = "STAKATER_"

// EnvVarName is the variable the envVar strategy sets for a source: Reloader's
// name, EnvVarPrefix + the source's name + "_" + its kind's EnvVarKind, the
// name converted by EnvVarPart. A source in another namespace than the
// workload's (a listed NAMESPACE/NAME) has the namespace before its name,
// so that it never shares a variable with the workload's own source of that
// name; Reloader reads no other namespace.
func EnvVarName(kind SourceKind, namespace, name, workloadNamespace string) string {
	if namespace != workloadNamespace {
		name = namespace + "_" + name
	}
	return EnvVarPrefix + EnvVarPart(name) + "_" + kind.EnvVarKind
}

// EnvVarPart is Reloader's conversion of a name into part of a variable
// name (util.ConvertToEnvVarName): upper case; letters and digits kept;
// any run of other characters after a letter or digit becomes one "_",
// and one at the start is dropped ("my-app.v2" is MY_APP_V2, "app-" APP_).
func EnvVarPart(s string) string {
	var b strings.Builder
	upper := strings.ToUpper(s)
	valid := false
	for i := 0; i < len(upper); i++ {
		c := upper[i]
		if 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
			valid = true
			continue
		}
		if valid {
			b.WriteByte('_')
		}
		valid = false
	}
	return b.String()
}

// compileEnvVarKind checks a source kind's envVarKind, or derives it from
// the kind's name.
func compileEnvVarKind(path, name, value string, p *problems) string {
	if value == "" {
		return EnvVarPart(name)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; !('A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			p.addf(path, "must be upper-case letters, digits and _, as Reloader's SECRETPROVIDERCLASS, got %q", value)
			break
		}
	}
	return value
}

// Strategy is how a restart of a workload is carried out.
type Strategy struct {
	Name StrategyName
	// Field (TimestampAt) is where the restart time is written, and
	// DoneField, when set, the status field that equals it once the
	// workload's controller has finished the restart.
	Field, DoneField refs.Path
	// JobTemplate (RunNow) holds the metadata and spec of the Job to create.
	JobTemplate refs.Path
	// ClearFields (Recreate) are removed from the object before it is
	// created again, besides its status and server-set metadata; and
	// ClearTemplateLabels from its pod template's labels: what the API
	// server derives from the old object's identity (a Job's selector).
	ClearFields         []refs.Path
	ClearTemplateLabels []string
}

// Restart is how a workload kind is restarted: its default strategy, and
// the ones a workload picks with the value of annotations.restartStrategy.
type Restart struct {
	Strategy     Strategy
	ByAnnotation map[string]Strategy
}

// StrategyOf returns the strategy a workload of the kind uses, given the
// value of its annotations.restartStrategy annotation ("" when absent).
// An unknown value uses the kind's default, as Reloader does.
func (r Restart) StrategyOf(value string) Strategy {
	if s, ok := r.ByAnnotation[value]; ok && value != "" {
		return s
	}
	return r.Strategy
}

// Uses reports whether the kind restarts some workload with the strategy.
func (r Restart) Uses(name StrategyName) bool {
	if r.Strategy.Name == name {
		return true
	}
	for _, s := range r.ByAnnotation {
		if s.Name == name {
			return true
		}
	}
	return false
}

// String names the strategy and where it writes, for explain and logs.
func (s Strategy) String() string {
	switch s.Name {
	case TimestampAt:
		return fmt.Sprintf("%s (the restart time at %s)", s.Name, s.Field)
	case RunNow:
		return fmt.Sprintf("%s (a Job from %s)", s.Name, s.JobTemplate)
	case Recreate:
		return fmt.Sprintf("%s (delete it and create it again)", s.Name)
	case EnvVar:
		return fmt.Sprintf("%s (%s<NAME>_<KIND> set to the source's checksum in the containers that read it)", s.Name, EnvVarPrefix)
	}
	return fmt.Sprintf("%s (the restart time in the pod template's annotations)", TemplateAnnotation)
}

// FileRestart says how a workload kind is restarted (workloads[].restart),
// and, in byAnnotation, which other strategies a workload may pick.
type FileRestart struct {
	// Value, in byAnnotation only, is the value of annotations.restartStrategy
	// that picks this strategy.
	Value string `json:"value"`
	// Strategy: templateAnnotation (the default), timestampAt, runNow,
	// recreate or envVar (README, "Restart strategies").
	Strategy string `json:"strategy"`
	// Field (timestampAt, required) is where the restart time is written,
	// e.g. spec.restartAt; DoneField (optional) is the status field the
	// workload's controller sets to the same time once it has restarted
	// the pods, e.g. status.restartedAt: the rollout is complete then.
	Field     string `json:"field"`
	DoneField string `json:"doneField"`
	// JobTemplate (runNow) is where the Job's metadata and spec are, e.g.
	// spec.jobTemplate; podTemplatePath must lie below it. Empty means
	// podTemplatePath without its last two fields (spec.template).
	JobTemplate string `json:"jobTemplate"`
	// ClearFields (recreate) are removed before the object is created
	// again, e.g. spec.selector of a Job; ClearTemplateLabels are removed
	// from its pod template's labels, e.g. a Job's controller-uid.
	ClearFields         []string `json:"clearFields"`
	ClearTemplateLabels []string `json:"clearTemplateLabels"`
	// ByAnnotation lists the strategies a workload of the kind picks with
	// the value of its annotations.restartStrategy annotation.
	ByAnnotation []FileRestart `json:"byAnnotation"`
}

// compileRestart checks a kind's restart strategies; podTemplate is the
// kind's compiled pod template path.
func compileRestart(path string, f FileRestart, podTemplate refs.Path, p *problems) Restart {
	if f.Value != "" {
		p.addf(path+".value", "only entries of byAnnotation have a value")
	}
	r := Restart{Strategy: compileStrategy(path, f, podTemplate, p)}
	for i, alt := range f.ByAnnotation {
		at := fmt.Sprintf("%s.byAnnotation[%d]", path, i)
		if len(alt.ByAnnotation) > 0 {
			p.addf(at+".byAnnotation", "only the kind's restart has byAnnotation")
		}
		if alt.Value == "" {
			p.add(at+".value", errRequired)
			continue
		}
		if _, dup := r.ByAnnotation[alt.Value]; dup {
			p.addf(at+".value", "duplicate value %q", alt.Value)
			continue
		}
		if r.ByAnnotation == nil {
			r.ByAnnotation = map[string]Strategy{}
		}
		r.ByAnnotation[alt.Value] = compileStrategy(at, alt, podTemplate, p)
	}
	return r
}

func compileStrategy(path string, f FileRestart, podTemplate refs.Path, p *problems) Strategy {
	s := Strategy{Name: StrategyName(f.Strategy)}
	if f.Strategy == "" {
		s.Name = TemplateAnnotation
	} else if !checkOneOf(p, path+".strategy", s.Name, StrategyNames) {
		return s
	}
	only := func(field string, set bool, of StrategyName) {
		if set && s.Name != of {
			p.addf(path+"."+field, "only the %s strategy reads it; this one is %s", of, s.Name)
		}
	}
	only("field", f.Field != "", TimestampAt)
	only("doneField", f.DoneField != "", TimestampAt)
	only("jobTemplate", f.JobTemplate != "", RunNow)
	only("clearFields", len(f.ClearFields) > 0, Recreate)
	only("clearTemplateLabels", len(f.ClearTemplateLabels) > 0, Recreate)
	switch s.Name {
	case TimestampAt:
		s.Field, _ = requiredPath(p, path+".field", f.Field, fieldWhy)
		if f.DoneField != "" {
			s.DoneField = strategyPath(path+".doneField", f.DoneField, p)
		}
	case RunNow:
		s.JobTemplate = compileJobTemplate(path+".jobTemplate", f.JobTemplate, podTemplate, p)
	case Recreate:
		for i, c := range f.ClearFields {
			s.ClearFields = append(s.ClearFields, strategyPath(fmt.Sprintf("%s.clearFields[%d]", path, i), c, p))
		}
		for i, l := range f.ClearTemplateLabels {
			checkName(p, fmt.Sprintf("%s.clearTemplateLabels[%d]", path, i), l, content.IsQualifiedName)
		}
		s.ClearTemplateLabels = f.ClearTemplateLabels
	}
	return s
}

// compileJobTemplate reads where a runNow Job's template is: the pod
// template the checksums describe must be that Job's, so podTemplatePath
// lies below it (its spec.template).
func compileJobTemplate(path, value string, podTemplate refs.Path, p *problems) refs.Path {
	fields, _ := podTemplate.Fields()
	if value == "" {
		if len(fields) < 3 {
			p.addf(path, "required: podTemplatePath %s has no Job template above it (JOBTEMPLATE.spec.template)", podTemplate)
			return refs.Path{}
		}
		value = strings.Join(fields[:len(fields)-2], ".")
	}
	jt := strategyPath(path, value, p)
	want := jt.String() + ".spec.template"
	if jt.String() != "" && podTemplate.String() != "" && podTemplate.String() != want {
		p.addf(path, "podTemplatePath must be %s (the Job's pod template), got %s", want, podTemplate)
	}
	return jt
}

// strategyPath parses a path that reaches one field: the empty Path when
// it does not (a problem says why).
func strategyPath(path, value string, p *problems) refs.Path {
	rp, _ := onePath(p, path, value, fieldWhy)
	return rp
}

// JobResource is what the runNow strategy creates.
func JobResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
}
