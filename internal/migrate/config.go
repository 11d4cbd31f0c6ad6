package migrate

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/examples"
	"github.com/restart-controller/restart-controller/internal/config"
)

// Finding is a setting whose behaviour the config file does not give as
// Reloader does, and what happens instead.
type Finding struct {
	// Setting names it as the user wrote it, e.g. "--namespace-selector".
	Setting string
	// Lost: Reloader's behaviour is lost (not yet supported, or not
	// possible); otherwise the difference is deliberate.
	Lost bool
	Text string
}

func (f Finding) String() string { return f.Setting + ": " + f.Text }

// Result is a migrated config file and what it does not carry over.
type Result struct {
	// File is the config file: the Reloader preset, adjusted, with the
	// findings as a comment at its top. It parses (Config checks).
	File     []byte
	Findings []Finding
}

// Lost reports whether any behaviour is lost.
func (r Result) Lost() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Lost })
}

// Config writes the config file that gives Options' behaviour: the Reloader
// preset (examples/presets/reloader.yaml) with each setting mapped, and a
// Finding for each that does not map exactly. With reloaderPace, restarts
// follow every change at once, as Reloader's do: no grace period, no
// waves, no breaker; without it the controller's pacing stays, as a
// deliberate difference.
func Config(o Options, reloaderPace bool) (Result, error) {
	preset, err := examples.Preset("reloader")
	if err != nil {
		return Result{}, fmt.Errorf("reading the Reloader preset: %w", err)
	}
	tree := map[string]any{}
	if err := yaml.Unmarshal(preset, &tree); err != nil {
		return Result{}, fmt.Errorf("parsing the Reloader preset: %w", err)
	}
	k, err := config.FileLayers(nil)
	if err != nil {
		return Result{}, fmt.Errorf("reading the built-in defaults: %w", err)
	}
	m := &mapping{tree: tree, defaults: k.Raw()}
	m.annotations(o.Annotations)
	m.scope(o)
	m.kinds(o)
	m.reloadStrategy(o.ReloadStrategy)
	m.behaviour(o)
	m.process(o)
	m.pace(reloaderPace)
	out, err := yaml.Marshal(tree)
	if err != nil {
		return Result{}, fmt.Errorf("writing the config file: %w", err)
	}
	file := append(header(m.findings), out...)
	if _, err := config.Parse(file); err != nil {
		return Result{}, fmt.Errorf("the migrated config does not parse (a bug in migrate): %w", err)
	}
	return Result{File: file, Findings: m.findings}, nil
}

// mapping builds the config tree and collects findings.
type mapping struct {
	tree map[string]any
	// defaults are the built-in defaults, the mapping's own copy (koanf's
	// Raw copies): what it takes from them into tree may be changed there.
	defaults map[string]any
	findings []Finding
}

func (m *mapping) lost(setting, format string, args ...any) {
	m.findings = append(m.findings, Finding{Setting: setting, Lost: true, Text: fmt.Sprintf(format, args...)})
}

func (m *mapping) differs(setting, format string, args ...any) {
	m.findings = append(m.findings, Finding{Setting: setting, Text: fmt.Sprintf(format, args...)})
}

// annotations renames the preset's annotations to the ones Reloader was
// told to read (its --*-annotation flags).
func (m *mapping) annotations(a Annotations) {
	def := DefaultOptions().Annotations
	rename := map[string]string{}
	for _, p := range [][2]string{
		{def.ConfigMap, a.ConfigMap}, {def.Secret, a.Secret}, {def.Auto, a.Auto},
		{def.ConfigMapAuto, a.ConfigMapAuto}, {def.SecretAuto, a.SecretAuto},
		{def.Search, a.Search}, {def.Match, a.Match}, {def.Ignore, a.Ignore},
	} {
		if p[1] != "" && p[1] != p[0] {
			rename[p[0]] = p[1]
		}
	}
	if len(rename) == 0 {
		return
	}
	for _, list := range []string{"optInAnnotations", "sourceListAnnotations", "ignoreAnnotations"} {
		for _, e := range entries(m.tree[list]) {
			for _, field := range []string{"annotation", "sourceAnnotation"} {
				if to, ok := rename[fmt.Sprint(e[field])]; ok {
					e[field] = to
				}
			}
		}
	}
}

// scope maps which namespaces and objects are watched. Reloader applies
// --namespaces-to-ignore and --namespace-selector only when it watches every
// namespace, and so does the migrated config (with namespaces set they are
// left out, as Reloader ignores them). Its selectors are lists of
// requirements it joins with commas, so all must hold (ANDed), after
// rewriting its legacy forms (labelSelector): one Kubernetes selector each.
func (m *mapping) scope(o Options) {
	if len(o.Namespaces) > 0 {
		m.tree["namespaces"] = o.Namespaces
	} else {
		if ignored := m.ignoredNamespaces(o.NamespacesToIgnore); len(ignored) > 0 {
			m.tree["ignoredNamespaces"] = ignored
		}
		if sel, ok := m.selector("--namespace-selector", o.NamespaceSelectors); ok {
			m.tree["namespaceSelector"] = sel
		}
	}
	if sel, ok := m.selector("--resource-label-selector", o.ResourceSelectors); ok {
		m.tree["sourceSelector"] = sel
		if o.ReloadOnCreate || o.ReloadOnDelete {
			m.differs("--resource-label-selector", "with sourceSelector a ConfigMap or Secret missing from the caches may exist unlabelled, "+
				"so creations and deletions restart nothing (--reload-on-create, --reload-on-delete); Reloader also takes a source "+
				"whose label is removed for a deletion, and one labelled later for a creation")
		}
	}
}

// ignoredNamespaces are Reloader's, trimmed; a name no namespace can have is
// left out (it ignores nothing).
func (m *mapping) ignoredNamespaces(names []string) []string {
	var out []string
	for _, ns := range names {
		ns = strings.TrimSpace(ns)
		switch {
		case ns == "" || slices.Contains(out, ns):
		case len(validation.IsDNS1123Label(ns)) > 0:
			m.differs("--namespaces-to-ignore", "%q is not a namespace name; left out", ns)
		default:
			out = append(out, ns)
		}
	}
	return out
}

// selector is Reloader's list of label requirements as one selector:
// "key:value" is "key=value", and a value "*" (with either) any value of
// the key (common.GetNamespaceLabelSelector, GetResourceLabelSelector).
// A list Reloader would refuse at start is reported lost.
func (m *mapping) selector(setting string, list []string) (string, bool) {
	if len(list) == 0 {
		return "", false
	}
	parts := make([]string, len(list))
	for i, kv := range list {
		kv = strings.Trim(strings.TrimSpace(kv), `"`)
		if k, v, ok := strings.Cut(kv, ":"); ok {
			kv = k + "=" + v
		}
		if k, v, ok := strings.Cut(kv, "="); ok && v == "*" {
			kv = k
		}
		parts[i] = kv
	}
	sel := strings.Join(parts, ",")
	if _, err := labels.Parse(sel); err != nil {
		m.lost(setting, "%q is not a label selector (%v); Reloader refuses it at start", strings.Join(list, ","), err)
		return "", false
	}
	return sel, true
}

// kinds maps which sources and workloads are watched.
func (m *mapping) kinds(o Options) {
	for _, r := range o.ResourcesToIgnore {
		switch r {
		case "configmaps":
			m.dropSource("configmap")
		case "secrets":
			m.dropSource("secret")
		default:
			m.lost("--resources-to-ignore", "%q is neither configmaps nor secrets; Reloader refuses it", r)
		}
	}
	if !o.IsArgoRollouts {
		m.dropWorkload("argoproj.io", "rollouts")
	}
	// A CronJob's change starts a Job now, as in Reloader (the default
	// restart strategy of CronJobs).
	if slices.Contains(o.WorkloadTypesToIgnore, "cronjobs") {
		m.dropWorkload("batch", "cronjobs")
	}
	if !slices.Contains(o.WorkloadTypesToIgnore, "jobs") {
		m.recreateJobs()
	}
	if o.IsOpenshift {
		m.deploymentConfigs()
	}
	m.csi(o)
}

// current is the tree's list at key: the defaults' when no entry was
// dropped or added before.
func (m *mapping) current(key string) []any {
	from := m.tree[key]
	if from == nil {
		from = m.defaults[key]
	}
	list, _ := from.([]any)
	return list
}

// deploymentConfigs adds OpenShift's DeploymentConfigs as examples/config.yaml
// shows them. Reloader's releases that restarted them found OpenShift by
// themselves; v1.4.21's chart still grants them (reloader.isOpenshift) and
// its end-to-end suites still expect them restarted, but its code restarting
// them was removed: migrate keeps what the installation asked for.
func (m *mapping) deploymentConfigs() {
	m.appendEntry("workloads", map[string]any{
		"group": "apps.openshift.io", "version": "v1", "resource": "deploymentconfigs", "podTemplatePath": "spec.template",
		"rollout": map[string]any{"status": "deploymentconfig"},
		"notRolledWhen": []any{
			map[string]any{"path": "spec.paused", "equals": true},
			map[string]any{"path": "spec.triggers", "noElement": map[string]any{"path": "type", "equals": "ConfigChange"}},
		},
	})
	m.differs("DeploymentConfigs", "restarted (a deploymentconfigs.apps.openshift.io kind): Reloader v1.4.21 grants them "+
		"(reloader.isOpenshift) but no longer restarts them, earlier releases did; one paused or without a ConfigChange "+
		"trigger is reported not rolled (a RestartNotRolled Warning Event)")
}

// reloadStrategy maps --reload-strategy. env-vars is the envVar strategy
// for every kind restarted through its pod template's annotation
// (templateAnnotation), picked by annotation or not. Not given, Reloader
// uses env-vars; the controller's default (templateAnnotation) is kept
// instead, as a difference: envVar is opt-in, changing the containers that
// GitOps tools compare (Reloader itself advises annotations under GitOps),
// and an installation that never chose env-vars chose nothing about its
// containers. Its pods roll the same way either way.
func (m *mapping) reloadStrategy(s string) {
	switch s {
	case "env-vars":
		// Set in the tree, so that changing its kinds changes the file.
		workloads := m.current("workloads")
		m.tree["workloads"] = workloads
		for _, e := range entries(workloads) {
			restart, _ := e["restart"].(map[string]any)
			if restart == nil {
				restart = map[string]any{}
				e["restart"] = restart
			}
			byAnnotation := entries(restart["byAnnotation"])
			for _, r := range append([]map[string]any{restart}, byAnnotation...) {
				if name, _ := r["strategy"].(string); name == "" || name == string(config.TemplateAnnotation) {
					r["strategy"] = string(config.EnvVar)
				}
			}
		}
		m.differs("--reload-strategy=env-vars", "a restart sets STAKATER_<NAME>_<KIND> (the envVar strategy) to the source's keyed "+
			"checksum, not a SHA-1 of its data, in every container that reads the source (Reloader: the first one); "+
			"CronJobs start a Job and Jobs are re-created without it")
	case "annotations":
		m.differs("--reload-strategy=annotations", "a restart writes com.xing.deployment-restart.timestamp into the pod template, "+
			"not reloader.stakater.com/last-reloaded-from; the pods roll the same way")
	case "":
		m.differs("--reload-strategy", "not given: Reloader's default is env-vars, written here as the controller's default, "+
			"a timestamp annotation on the pod template (the containers, which GitOps tools compare, are left alone; the pods "+
			"roll the same way); migrate with --reload-strategy=env-vars (Helm reloader.reloadStrategy=env-vars) for STAKATER_ variables")
	default:
		m.lost("--reload-strategy", "%q is neither env-vars nor annotations; Reloader refuses it at start", s)
	}
}

// dropSource removes a source kind and everything that names it: its
// references and the annotations of that kind alone.
func (m *mapping) dropSource(name string) {
	keep := func(e map[string]any) bool { return fmt.Sprint(e["source"]) != name }
	m.tree["sources"] = filter(entries(m.current("sources")), func(e map[string]any) bool { return fmt.Sprint(e["name"]) != name })
	m.tree["references"] = filter(entries(m.current("references")), keep)
	for _, list := range []string{"sourceListAnnotations", "excludeAnnotations"} {
		m.tree[list] = filter(entries(m.tree[list]), keep)
	}
	m.tree["optInAnnotations"] = filter(entries(m.tree["optInAnnotations"]), func(e map[string]any) bool {
		s, _ := e["sources"].([]any)
		return len(s) != 1 || fmt.Sprint(s[0]) != name
	})
}

// recreateJobs adds Jobs with the recreate strategy: Reloader deletes and
// re-creates a Job whose sources change, unless told to ignore Jobs. Here
// that is never a default, so the migrated file says it explicitly.
func (m *mapping) recreateJobs() {
	m.appendEntry("workloads", map[string]any{
		"group": "batch", "version": "v1", "resource": "jobs", "podTemplatePath": "spec.template",
		"rollout": map[string]any{"status": "job"},
		"restart": map[string]any{"strategy": "recreate", "clearFields": []any{"spec.selector"},
			"clearTemplateLabels": []any{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"}},
	})
	m.differs("Jobs", "re-created on a change as in Reloader (a jobs kind with restart: {strategy: recreate}, which is never a default here): a controller killed between the deletion and the creation loses the Job; remove the kind, or migrate with --ignored-workload-types=jobs, to leave Jobs alone")
}

func (m *mapping) dropWorkload(group, resource string) {
	m.tree["workloads"] = filter(entries(m.current("workloads")), func(e map[string]any) bool {
		return fmt.Sprint(e["group"]) != group || fmt.Sprint(e["resource"]) != resource
	})
}

// behaviour maps when restarts happen.
func (m *mapping) behaviour(o Options) {
	if o.AutoReloadAll {
		m.tree["optInAll"] = true
	}
	// Reloader's flags, both off by default; on here by default.
	life := map[string]any{}
	if !o.ReloadOnCreate {
		life["restartOnCreate"] = false
	}
	if !o.ReloadOnDelete {
		life["restartOnDelete"] = false
	}
	if len(life) > 0 {
		m.tree["sourceLifecycle"] = life
	}
	if !o.SyncAfterRestart {
		m.differs("--sync-after-restart=false", "changes made while the controller was down are acted on when it starts (Reloader: lost)")
	}
	if o.WebhookURLSet {
		m.lost("--webhook-url", "not supported: Reloader posts to the webhook instead of restarting; restart-controller restarts")
	}
	if o.AlertOnReload {
		m.alerts(o.AlertSink)
	}
	if o.MetricsByNamespace {
		// The preset exports Reloader's reload counter (metrics.reloaderCompatible).
		metrics, _ := m.tree["metrics"].(map[string]any)
		if metrics == nil {
			metrics = map[string]any{"reloaderCompatible": true}
			m.tree["metrics"] = metrics
		}
		metrics["reloaderByNamespace"] = true
	}
}

// alertSecret is the Secret (in the controller's namespace) the migrated
// sink reads its URL from: Reloader reads ALERT_WEBHOOK_URL from its
// environment, which migrate cannot read and must not print.
const alertSecret, alertSecretKey = "reloader-alert-webhook", "url"

// alerts maps Reloader's ALERT_* settings to a notification sink sent on
// every restart, as Reloader posts on every reload.
func (m *mapping) alerts(sink string) {
	kind := map[string]string{"slack": "slack", "teams": "teams", "gchat": "googleChat"}[strings.ToLower(strings.TrimSpace(sink))]
	if kind == "" {
		kind = "webhook"
		m.differs("ALERT_SINK=raw", "the raw webhook receives a versioned JSON document (docs/notifications.md), not Reloader's {\"text\": ...}")
	}
	m.tree["notifications"] = map[string]any{"sinks": []any{map[string]any{
		"name": "reloader-alert", "type": kind, "send": []any{"restart"},
		"urlSecret": map[string]any{"name": alertSecret, "key": alertSecretKey},
	}}}
	m.differs("ALERT_WEBHOOK_URL", "the sink's URL is read from the Secret %s (key %s) in the controller's namespace: create it with the URL Reloader had in ALERT_WEBHOOK_URL; ALERT_ADDITIONAL_INFO and ALERT_WEBHOOK_PROXY have no counterpart", alertSecret, alertSecretKey)
}

// pace sets Reloader's pace, or names the controller's as a difference.
func (m *mapping) pace(reloader bool) {
	if !reloader {
		m.differs("pace", "changes are merged over a 5s grace period, a change reaching more than 3 workloads restarts them in health-gated waves, and a workload restarted 5 times in 30m is held (Reloader: every change at once; migrate --reloader-pace writes that)")
		return
	}
	m.tree["restartGracePeriod"] = 0
	m.tree["waves"] = map[string]any{"unpacedUpTo": 100000}
	m.tree["breaker"] = map[string]any{"budget": 0}
}

// process maps how the controller's own process runs.
func (m *mapping) process(o Options) {
	m.tree["leaderElection"] = map[string]any{"enabled": o.EnableHA}
	if strings.EqualFold(o.LogFormat, "json") {
		m.tree["logFormat"] = "json"
	}
	if o.LogLevel == "debug" || o.LogLevel == "trace" {
		m.tree["verbose"] = true
	}
	if o.EnablePProf {
		m.tree["enableProfiling"] = true
	}
}

// header writes the findings as the file's opening comment.
func header(findings []Finding) []byte {
	var b bytes.Buffer
	b.WriteString("# restart-controller config migrated from stakater/Reloader's settings\n")
	b.WriteString("# (kubectl restart-controller migrate), starting from the Reloader preset,\n")
	b.WriteString("# examples/presets/reloader.yaml. docs/switching-from-reloader.md explains it.\n")
	for _, lost := range []bool{true, false} {
		title := "# Differs on purpose:\n"
		if lost {
			title = "#\n# Not carried over (Reloader's behaviour is lost):\n"
		} else {
			title = "#\n" + title
		}
		wrote := false
		for _, f := range findings {
			if f.Lost == lost {
				if !wrote {
					b.WriteString(title)
					wrote = true
				}
				fmt.Fprintf(&b, "#   %s\n", f)
			}
		}
	}
	return b.Bytes()
}

// entries reads a list of maps out of a decoded YAML tree.
func entries(v any) []map[string]any {
	var out []map[string]any
	list, _ := v.([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func filter(list []map[string]any, keep func(map[string]any) bool) []any {
	out := []any{}
	for _, e := range list {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
