package migrate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/knadh/koanf/maps"
	"sigs.k8s.io/yaml"
)

// Values are Helm values: a values file, with --set applied over it.
type Values map[string]any

// ReadValues parses a values file (YAML) and merges it over v, as Helm
// layers several -f files: maps merge key by key, anything else replaces.
func (v Values) ReadValues(data []byte) error {
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("parsing Helm values: %w", err)
	}
	maps.Merge(file, v)
	return nil
}

// Set applies one --set argument: comma-separated key=value pairs, keys
// dotted, values typed as Helm types them (true/false, integers, {a,b}
// lists, anything else a string; "\," is a literal comma).
func (v Values) Set(arg string) error {
	for _, pair := range splitUnescaped(arg, ',', true) {
		key, value, ok := strings.Cut(pair, "=")
		if !ok || key == "" {
			return fmt.Errorf("--set %q: want key=value", pair)
		}
		maps.Merge(maps.Unflatten(map[string]any{key: typed(value)}, "."), v)
	}
	return nil
}

// splitUnescaped splits s at sep, except where sep is escaped by a
// backslash or, when braces is set, inside {...}.
func splitUnescaped(s string, sep byte, braces bool) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && s[i+1] == sep:
			cur.WriteByte(sep)
			i++
		case braces && c == '{':
			depth++
			cur.WriteByte(c)
		case braces && c == '}' && depth > 0:
			depth--
			cur.WriteByte(c)
		case c == sep && depth == 0:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, cur.String())
}

func typed(value string) any {
	switch {
	case value == "true":
		return true
	case value == "false":
		return false
	case strings.HasPrefix(value, "{") && strings.HasSuffix(value, "}"):
		var list []any
		if inner := value[1 : len(value)-1]; inner != "" {
			for _, item := range splitUnescaped(inner, ',', false) {
				list = append(list, typed(item))
			}
		}
		return list
	}
	if n, err := strconv.ParseInt(value, 10, 64); err == nil {
		return n
	}
	return value
}

// get returns the value at a dotted path, nil when absent.
func (v Values) get(path string) any {
	return maps.Search(v, strings.Split(path, "."))
}

// isTrue is the chart's `eq X true` / `if X` for a boolean value.
func (v Values) isTrue(path string) bool {
	switch b := v.get(path).(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}

// number is a numeric value, 0 when absent (a values file gives float64,
// --set int64).
func (v Values) number(path string) float64 {
	switch n := v.get(path).(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// str is a value as the chart prints it, "" when absent.
func (v Values) str(path string) string {
	switch s := v.get(path).(type) {
	case nil:
		return ""
	case string:
		return s
	default:
		return fmt.Sprint(s)
	}
}

// list is a value that the chart accepts as a list or a comma-separated
// string.
func (v Values) list(path string) []string {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	switch l := v.get(path).(type) {
	case []any:
		for _, item := range l {
			add(fmt.Sprint(item))
		}
	case string:
		for _, s := range strings.Split(l, ",") {
			add(s)
		}
	}
	return out
}

// FromHelmValues reads the values of Reloader's Helm chart (v1.4.21) as
// its templates render them into Reloader's flags and environment;
// releaseNamespace is where the release is installed.
func FromHelmValues(v Values, releaseNamespace string) (Options, error) {
	var args []string
	// The reloader.* values the chart renders into a flag of the same
	// meaning, by that flag's name.
	for _, f := range []struct{ value, flag string }{
		{"reloader.logFormat", "log-format"},
		{"reloader.logLevel", "log-level"},
		{"reloader.resourceLabelSelector", "resource-label-selector"},
		{"reloader.custom_annotations.configmap", "configmap-annotation"},
		{"reloader.custom_annotations.secret", "secret-annotation"},
		{"reloader.custom_annotations.auto", "auto-annotation"},
		{"reloader.custom_annotations.secret_auto", "secret-auto-annotation"},
		{"reloader.custom_annotations.configmap_auto", "configmap-auto-annotation"},
		{"reloader.custom_annotations.search", "auto-search-annotation"},
		{"reloader.custom_annotations.match", "search-match-annotation"},
		{"reloader.custom_annotations.ignore", "ignore-annotation"},
		{"reloader.webhookUrl", "webhook-url"},
	} {
		if s := v.str(f.value); s != "" {
			args = append(args, "--"+f.flag+"="+s)
		}
	}
	for _, b := range []struct{ value, flag string }{
		{"reloader.isArgoRollouts", "is-Argo-Rollouts"}, {"reloader.reloadOnCreate", "reload-on-create"},
		{"reloader.reloadOnDelete", "reload-on-delete"}, {"reloader.syncAfterRestart", "sync-after-restart"},
		{"reloader.autoReloadAll", "auto-reload-all"}, {"reloader.enableCSIIntegration", "enable-csi-integration"},
		{"reloader.enablePProf", "enable-pprof"}, {"reloader.enableHA", "enable-ha"},
	} {
		if v.isTrue(b.value) {
			args = append(args, "--"+b.flag+"=true")
		}
	}
	if n := v.number("reloader.deployment.replicas"); n > 1 {
		args = append(args, "--enable-ha=true")
	}
	if s := v.str("reloader.reloadStrategy"); s != "" && s != "default" {
		args = append(args, "--reload-strategy="+s)
	}
	if v.isTrue("reloader.ignoreSecrets") {
		args = append(args, "--resources-to-ignore=secrets")
	}
	if v.isTrue("reloader.ignoreConfigMaps") {
		args = append(args, "--resources-to-ignore=configmaps")
	}
	for _, w := range []struct{ value, kind string }{{"reloader.ignoreJobs", "jobs"}, {"reloader.ignoreCronJobs", "cronjobs"}} {
		if v.isTrue(w.value) {
			args = append(args, "--ignored-workload-types="+w.kind)
		}
	}
	global := v.get("reloader.watchGlobally") == nil || v.isTrue("reloader.watchGlobally")
	if ns := v.list("reloader.namespaces"); len(ns) > 0 {
		// The chart always adds the release's own namespace.
		ns = append(ns, releaseNamespace)
		slices.Sort(ns)
		args = append(args, "--namespaces="+strings.Join(slices.Compact(ns), ","))
	}
	if global {
		if s := v.str("reloader.ignoreNamespaces"); s != "" {
			args = append(args, "--namespaces-to-ignore="+s)
		}
		if s := v.str("reloader.namespaceSelector"); s != "" {
			args = append(args, "--namespace-selector="+s)
		}
	}
	env := chartEnv(v, global, releaseNamespace)
	o, err := FromFlags(args, func(k string) (string, bool) { s, ok := env[k]; return s, ok })
	if err != nil {
		return Options{}, fmt.Errorf("reading Helm values: %w", err)
	}
	// The chart grants Reloader DeploymentConfigs with it; no flag of
	// Reloader's carries it.
	o.IsOpenshift = v.isTrue("reloader.isOpenshift")
	return o, nil
}

// chartEnv is the environment the chart gives Reloader: the namespace it
// is confined to, the metrics switch, and the open env values (alerts).
func chartEnv(v Values, global bool, releaseNamespace string) map[string]string {
	env := map[string]string{}
	if !global && len(v.list("reloader.namespaces")) == 0 {
		env["KUBERNETES_NAMESPACE"] = releaseNamespace
	}
	if v.isTrue("reloader.enableMetricsByNamespace") {
		env["METRICS_COUNT_BY_NAMESPACE"] = "enabled"
	}
	if open, ok := v.get("reloader.deployment.env.open").(map[string]any); ok {
		for k, val := range open {
			env[k] = fmt.Sprint(val)
		}
	}
	// env.secret holds values the chart puts in a Secret: only the two
	// that are not secret are read. env.existing names keys of Secrets
	// that are not here to read.
	if m, ok := v.get("reloader.deployment.env.secret").(map[string]any); ok {
		for _, k := range []string{"ALERT_ON_RELOAD", "ALERT_SINK"} {
			if val, ok := m[k]; ok {
				env[k] = fmt.Sprint(val)
			}
		}
	}
	return env
}
