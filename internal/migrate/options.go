// Package migrate turns a stakater/Reloader installation's settings (its
// Helm values, or its command line and environment) into restart-controller's
// config file, starting from the Reloader preset, and names every setting
// whose behaviour does not carry over. It reads and writes text only: no
// cluster, no client.
//
// Every form is first read into Options, Reloader's own command-line
// options (the Helm chart renders its values into those flags), so each
// setting is mapped to the config file in one place (Config).
package migrate

import (
	"fmt"
	"strconv"
	"strings"
)

// Options are Reloader's settings, named after its flags (and the
// environment variables it reads). Only what changes behaviour is kept;
// the webhook URLs are kept as "set or not", never as values: they are
// secrets, and nothing here may print them.
type Options struct {
	AutoReloadAll bool
	// Annotations are the annotation names (the --*-annotation flags).
	Annotations Annotations
	// ResourcesToIgnore holds "configmaps" and/or "secrets".
	ResourcesToIgnore []string
	// WorkloadTypesToIgnore holds "jobs" and/or "cronjobs".
	WorkloadTypesToIgnore []string
	// Namespaces are the namespaces watched (--namespaces, or the one in
	// KUBERNETES_NAMESPACE); empty: all.
	Namespaces         []string
	NamespacesToIgnore []string
	NamespaceSelectors []string
	ResourceSelectors  []string
	IsArgoRollouts     bool
	// IsOpenshift: Reloader restarted OpenShift DeploymentConfigs (Helm
	// reloader.isOpenshift, or migrate's --openshift; Reloader has no flag
	// for it: its releases that restarted them found OpenShift's API by
	// themselves).
	IsOpenshift bool
	// ReloadStrategy is "env-vars" or "annotations" as given, "" when not
	// given (Reloader then uses env-vars; Config says what is written).
	ReloadStrategy       string
	ReloadOnCreate       bool
	ReloadOnDelete       bool
	SyncAfterRestart     bool
	EnableHA             bool
	EnablePProf          bool
	EnableCSIIntegration bool
	LogFormat            string
	LogLevel             string
	// WebhookURLSet: --webhook-url was given (Reloader then posts instead
	// of restarting).
	WebhookURLSet bool
	// MetricsByNamespace: METRICS_COUNT_BY_NAMESPACE=enabled.
	MetricsByNamespace bool
	// AlertOnReload: ALERT_ON_RELOAD=true, posting to AlertSink.
	AlertOnReload bool
	AlertSink     string
}

// Annotations are the annotation names Reloader reads, as its flags set
// them.
type Annotations struct {
	ConfigMap, Secret, Auto, ConfigMapAuto, SecretAuto, Search, Match, Ignore string
}

// DefaultOptions are Reloader's defaults, those of its flags.
func DefaultOptions() Options {
	return Options{
		Annotations: Annotations{
			ConfigMap:     "configmap.reloader.stakater.com/reload",
			Secret:        "secret.reloader.stakater.com/reload",
			Auto:          "reloader.stakater.com/auto",
			ConfigMapAuto: "configmap.reloader.stakater.com/auto",
			SecretAuto:    "secret.reloader.stakater.com/auto",
			Search:        "reloader.stakater.com/search",
			Match:         "reloader.stakater.com/match",
			Ignore:        "reloader.stakater.com/ignore",
		},
		LogLevel: "info",
	}
}

// reloaderFlag is one of Reloader's flags: how it sets its field of Options.
type reloaderFlag struct {
	isBool bool
	set    func(value string) error
}

func boolFlag(field *bool) reloaderFlag {
	return reloaderFlag{isBool: true, set: func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean: %q", v)
		}
		*field = b
		return nil
	}}
}

// stringBoolFlag is a flag Reloader declares as a string and compares with
// "true" (--is-Argo-Rollouts, --reload-on-create, --reload-on-delete).
func stringBoolFlag(field *bool) reloaderFlag {
	return reloaderFlag{set: func(v string) error { *field = v == "true"; return nil }}
}

func stringFlag(field *string) reloaderFlag {
	return reloaderFlag{set: func(v string) error { *field = v; return nil }}
}

// sliceFlag appends comma-separated values, as pflag's StringSlice does
// (repeating the flag adds to the list).
func sliceFlag(field *[]string) reloaderFlag {
	return reloaderFlag{set: func(v string) error {
		for _, s := range strings.Split(strings.Trim(v, `"`), ",") {
			if s = strings.TrimSpace(s); s != "" {
				*field = append(*field, s)
			}
		}
		return nil
	}}
}

// flags are Reloader's flags that change behaviour; the others (log level
// aside) configure its own process and have no counterpart to carry over.
func flags(o *Options) map[string]reloaderFlag {
	return map[string]reloaderFlag{
		"auto-reload-all":           boolFlag(&o.AutoReloadAll),
		"configmap-annotation":      stringFlag(&o.Annotations.ConfigMap),
		"secret-annotation":         stringFlag(&o.Annotations.Secret),
		"auto-annotation":           stringFlag(&o.Annotations.Auto),
		"configmap-auto-annotation": stringFlag(&o.Annotations.ConfigMapAuto),
		"secret-auto-annotation":    stringFlag(&o.Annotations.SecretAuto),
		"auto-search-annotation":    stringFlag(&o.Annotations.Search),
		"search-match-annotation":   stringFlag(&o.Annotations.Match),
		"ignore-annotation":         stringFlag(&o.Annotations.Ignore),
		"resources-to-ignore":       sliceFlag(&o.ResourcesToIgnore),
		"ignored-workload-types":    sliceFlag(&o.WorkloadTypesToIgnore),
		"namespaces":                sliceFlag(&o.Namespaces),
		"namespaces-to-ignore":      sliceFlag(&o.NamespacesToIgnore),
		"namespace-selector":        sliceFlag(&o.NamespaceSelectors),
		"resource-label-selector":   sliceFlag(&o.ResourceSelectors),
		"is-Argo-Rollouts":          stringBoolFlag(&o.IsArgoRollouts),
		"reload-strategy":           stringFlag(&o.ReloadStrategy),
		"reload-on-create":          stringBoolFlag(&o.ReloadOnCreate),
		"reload-on-delete":          stringBoolFlag(&o.ReloadOnDelete),
		"sync-after-restart":        boolFlag(&o.SyncAfterRestart),
		"enable-ha":                 boolFlag(&o.EnableHA),
		"enable-pprof":              boolFlag(&o.EnablePProf),
		"enable-csi-integration":    boolFlag(&o.EnableCSIIntegration),
		"log-format":                stringFlag(&o.LogFormat),
		"log-level":                 stringFlag(&o.LogLevel),
		"webhook-url": {set: func(v string) error {
			o.WebhookURLSet = v != ""
			return nil
		}},
		// Reloader's own process: nothing to carry over.
		"pprof-addr":                       {set: func(string) error { return nil }},
		"pause-deployment-annotation":      {set: func(string) error { return nil }},
		"pause-deployment-time-annotation": {set: func(string) error { return nil }},
	}
}

// FromFlags reads Reloader's command line (its arguments, without the
// program name) and the environment it reads. An unknown flag is an error,
// so that no setting is dropped unseen.
func FromFlags(args []string, lookupEnv func(string) (string, bool)) (Options, error) {
	o := DefaultOptions()
	known := flags(&o)
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		f, ok := known[name]
		if !strings.HasPrefix(arg, "-") || !ok {
			return Options{}, fmt.Errorf("reading Reloader's arguments: %q is not a flag this command knows", arg)
		}
		if !hasValue {
			switch {
			case f.isBool:
				value = "true"
			case i+1 < len(args):
				i++
				value = args[i]
			default:
				return Options{}, fmt.Errorf("reading Reloader's arguments: --%s needs a value", name)
			}
		}
		if err := f.set(value); err != nil {
			return Options{}, fmt.Errorf("reading Reloader's arguments: --%s: %w", name, err)
		}
	}
	readEnv(&o, lookupEnv)
	return o, nil
}

// readEnv reads the environment variables Reloader reads.
func readEnv(o *Options, lookupEnv func(string) (string, bool)) {
	if ns, ok := lookupEnv("KUBERNETES_NAMESPACE"); ok && ns != "" && len(o.Namespaces) == 0 {
		o.Namespaces = []string{ns}
	}
	if v, _ := lookupEnv("METRICS_COUNT_BY_NAMESPACE"); v == "enabled" {
		o.MetricsByNamespace = true
	}
	if v, _ := lookupEnv("ALERT_ON_RELOAD"); v == "true" {
		o.AlertOnReload = true
		o.AlertSink, _ = lookupEnv("ALERT_SINK")
	}
}
