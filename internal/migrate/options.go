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

// reloaderFlag is one of Reloader's flags: how it is set into Options.
type reloaderFlag struct {
	isBool bool
	set    func(o *Options, value string) error
}

func boolFlag(field func(*Options) *bool) reloaderFlag {
	return reloaderFlag{isBool: true, set: func(o *Options, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean: %q", v)
		}
		*field(o) = b
		return nil
	}}
}

// stringBoolFlag is a flag Reloader declares as a string and compares with
// "true" (--is-Argo-Rollouts, --reload-on-create, --reload-on-delete).
func stringBoolFlag(field func(*Options) *bool) reloaderFlag {
	return reloaderFlag{set: func(o *Options, v string) error { *field(o) = v == "true"; return nil }}
}

func stringFlag(field func(*Options) *string) reloaderFlag {
	return reloaderFlag{set: func(o *Options, v string) error { *field(o) = v; return nil }}
}

// sliceFlag appends comma-separated values, as pflag's StringSlice does
// (repeating the flag adds to the list).
func sliceFlag(field func(*Options) *[]string) reloaderFlag {
	return reloaderFlag{set: func(o *Options, v string) error {
		for _, s := range strings.Split(strings.Trim(v, `"`), ",") {
			if s = strings.TrimSpace(s); s != "" {
				*field(o) = append(*field(o), s)
			}
		}
		return nil
	}}
}

// flags are Reloader's flags that change behaviour; the others (log level
// aside) configure its own process and have no counterpart to carry over.
func flags() map[string]reloaderFlag {
	a := func(f func(*Annotations) *string) reloaderFlag {
		return stringFlag(func(o *Options) *string { return f(&o.Annotations) })
	}
	return map[string]reloaderFlag{
		"auto-reload-all":           boolFlag(func(o *Options) *bool { return &o.AutoReloadAll }),
		"configmap-annotation":      a(func(a *Annotations) *string { return &a.ConfigMap }),
		"secret-annotation":         a(func(a *Annotations) *string { return &a.Secret }),
		"auto-annotation":           a(func(a *Annotations) *string { return &a.Auto }),
		"configmap-auto-annotation": a(func(a *Annotations) *string { return &a.ConfigMapAuto }),
		"secret-auto-annotation":    a(func(a *Annotations) *string { return &a.SecretAuto }),
		"auto-search-annotation":    a(func(a *Annotations) *string { return &a.Search }),
		"search-match-annotation":   a(func(a *Annotations) *string { return &a.Match }),
		"ignore-annotation":         a(func(a *Annotations) *string { return &a.Ignore }),
		"resources-to-ignore":       sliceFlag(func(o *Options) *[]string { return &o.ResourcesToIgnore }),
		"ignored-workload-types":    sliceFlag(func(o *Options) *[]string { return &o.WorkloadTypesToIgnore }),
		"namespaces":                sliceFlag(func(o *Options) *[]string { return &o.Namespaces }),
		"namespaces-to-ignore":      sliceFlag(func(o *Options) *[]string { return &o.NamespacesToIgnore }),
		"namespace-selector":        sliceFlag(func(o *Options) *[]string { return &o.NamespaceSelectors }),
		"resource-label-selector":   sliceFlag(func(o *Options) *[]string { return &o.ResourceSelectors }),
		"is-Argo-Rollouts":          stringBoolFlag(func(o *Options) *bool { return &o.IsArgoRollouts }),
		"reload-strategy":           stringFlag(func(o *Options) *string { return &o.ReloadStrategy }),
		"reload-on-create":          stringBoolFlag(func(o *Options) *bool { return &o.ReloadOnCreate }),
		"reload-on-delete":          stringBoolFlag(func(o *Options) *bool { return &o.ReloadOnDelete }),
		"sync-after-restart":        boolFlag(func(o *Options) *bool { return &o.SyncAfterRestart }),
		"enable-ha":                 boolFlag(func(o *Options) *bool { return &o.EnableHA }),
		"enable-pprof":              boolFlag(func(o *Options) *bool { return &o.EnablePProf }),
		"enable-csi-integration":    boolFlag(func(o *Options) *bool { return &o.EnableCSIIntegration }),
		"log-format":                stringFlag(func(o *Options) *string { return &o.LogFormat }),
		"log-level":                 stringFlag(func(o *Options) *string { return &o.LogLevel }),
		"webhook-url": {set: func(o *Options, v string) error {
			o.WebhookURLSet = v != ""
			return nil
		}},
		// Reloader's own process: nothing to carry over.
		"pprof-addr":                       {set: func(*Options, string) error { return nil }},
		"pause-deployment-annotation":      {set: func(*Options, string) error { return nil }},
		"pause-deployment-time-annotation": {set: func(*Options, string) error { return nil }},
	}
}

// FromFlags reads Reloader's command line (its arguments, without the
// program name) and the environment it reads. An unknown flag is an error,
// so that no setting is dropped unseen.
func FromFlags(args []string, lookupEnv func(string) (string, bool)) (Options, error) {
	o := DefaultOptions()
	known := flags()
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
		if err := f.set(&o, value); err != nil {
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
