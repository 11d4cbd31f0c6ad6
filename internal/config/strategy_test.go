package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestRestartStrategyErrors: every mistake in workloads[].restart names its
// place, and all of them are reported at once.
func TestRestartStrategyErrors(t *testing.T) {
	file := `
annotations: {restartStrategy: com.xing.deployment-restart.rollout}
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template, restart: {strategy: rolling}}
- {group: argoproj.io, version: v1alpha1, resource: rollouts, podTemplatePath: spec.template,
   restart: {strategy: timestampAt, doneField: "status[x"}}
- {group: batch, version: v1, resource: cronjobs, podTemplatePath: spec.jobTemplate.spec.template,
   restart: {strategy: runNow, jobTemplate: spec.other, field: spec.restartAt}}
- {group: batch, version: v1, resource: jobs, podTemplatePath: spec.template,
   restart: {strategy: recreate, clearFields: ["spec.x[*]"], clearTemplateLabels: ["a b"], value: x,
     byAnnotation: [{strategy: timestampAt, field: spec.restartAt},
                    {value: again, strategy: runNow},
                    {value: again},
                    {value: deep, byAnnotation: [{value: x}]}]}}
- {group: example.com, version: v1, resource: widgets, podTemplatePath: spec.template,
   restart: {strategy: timestampAt, field: ""}}
`
	_, err := Parse([]byte(file))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	want := []string{
		`annotations.restartStrategy: must differ from annotations.rollout (both "com.xing.deployment-restart.rollout")`,
		`workloads[0].restart.strategy: must be one of templateAnnotation, timestampAt, runNow, recreate, envVar, got "rolling"`,
		`workloads[1].restart.doneField: unexpected character '[' at offset 6: only [*] is supported`,
		`workloads[1].restart.field: required`,
		`workloads[2].restart.field: only the timestampAt strategy reads it; this one is runNow`,
		`workloads[2].restart.jobTemplate: podTemplatePath must be spec.other.spec.template (the Job's pod template), got spec.jobTemplate.spec.template`,
		`workloads[3].restart.byAnnotation[0].value: required`,
		`workloads[3].restart.byAnnotation[1].jobTemplate: required: podTemplatePath spec.template has no Job template above it (JOBTEMPLATE.spec.template)`,
		`workloads[3].restart.byAnnotation[2].value: duplicate value "again"`,
		`workloads[3].restart.byAnnotation[3].byAnnotation: only the kind's restart has byAnnotation`,
		`workloads[3].restart.clearFields[0]: must not contain [*]: it names one field`,
		`workloads[3].restart.clearTemplateLabels[0]: invalid "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		`workloads[3].restart.value: only entries of byAnnotation have a value`,
		`workloads[4].restart.field: required`,
	}
	if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRestartStrategies: the defaults, and a workload's pick by annotation.
func TestRestartStrategies(t *testing.T) {
	c, err := Parse([]byte(`
workloads:
- {group: argoproj.io, version: v1alpha1, resource: rollouts, podTemplatePath: spec.template,
   restart: {byAnnotation: [{value: restart, strategy: timestampAt, field: spec.restartAt, doneField: status.restartedAt}]}}
- {group: batch, version: v1, resource: cronjobs, podTemplatePath: spec.jobTemplate.spec.template, restart: {strategy: runNow}}
- {group: batch, version: v1, resource: jobs, podTemplatePath: spec.template, restart: {strategy: recreate, clearFields: [spec.selector]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	rollouts, cronjobs, jobs := c.Workloads[0].Restart, c.Workloads[1].Restart, c.Workloads[2].Restart
	for value, want := range map[string]string{
		"":        "templateAnnotation (the restart time in the pod template's annotations)",
		"restart": "timestampAt (the restart time at spec.restartAt)",
		"bogus":   "templateAnnotation (the restart time in the pod template's annotations)",
	} {
		if got := rollouts.StrategyOf(value).String(); got != want {
			t.Errorf("rollouts, annotation %q: %s, want %s", value, got, want)
		}
	}
	if s := rollouts.StrategyOf("restart"); s.DoneField.String() != "status.restartedAt" {
		t.Errorf("doneField %s", s.DoneField)
	}
	// The Job template defaults to podTemplatePath without .spec.template.
	if got := cronjobs.Strategy.String(); got != "runNow (a Job from spec.jobTemplate)" {
		t.Errorf("cronjobs: %s", got)
	}
	if len(jobs.Strategy.ClearFields) != 1 || jobs.Strategy.ClearFields[0].String() != "spec.selector" || !jobs.Uses(Recreate) || jobs.Uses(RunNow) {
		t.Errorf("jobs: %+v", jobs)
	}
	if !rollouts.Uses(TimestampAt) || rollouts.Uses(RunNow) {
		t.Errorf("rollouts: %+v", rollouts)
	}
}

// The Reloader preset reads reloader.stakater.com/rollout-strategy: restart
// sets an Argo Rollout's spec.restartAt, rollout patches its template.
func TestReloaderPresetRolloutStrategy(t *testing.T) {
	raw, err := os.ReadFile("../../examples/presets/reloader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.Annotations.RestartStrategy != "reloader.stakater.com/rollout-strategy" {
		t.Fatalf("annotations.restartStrategy = %q", c.Annotations.RestartStrategy)
	}
	for _, w := range c.Workloads {
		if w.GVR.Resource != "rollouts" {
			continue
		}
		if s := w.Restart.StrategyOf("restart"); s.Name != TimestampAt || s.Field.String() != "spec.restartAt" || s.DoneField.String() != "status.restartedAt" {
			t.Errorf("restart: %+v", s)
		}
		if s := w.Restart.StrategyOf("rollout"); s.Name != TemplateAnnotation {
			t.Errorf("rollout: %+v", s)
		}
		return
	}
	t.Fatal("the preset watches no Rollouts")
}

// EnvVarPart is Reloader's util.ConvertToEnvVarName (v1.4.21), byte for
// byte: the envVar strategy must name the variable Reloader named, or a
// migrated workload would get a second one beside Reloader's.
func TestEnvVarPart(t *testing.T) {
	for in, want := range map[string]string{
		"app":             "APP",
		"my-app.v2":       "MY_APP_V2",
		"a--b":            "A_B",
		"-app":            "APP",
		"app-":            "APP_",
		"app--":           "APP_",
		"App_Config":      "APP_CONFIG",
		"123":             "123",
		"":                "",
		"..":              "",
		"shop_db.secret1": "SHOP_DB_SECRET1",
		"über":            "BER",
	} {
		if got := EnvVarPart(in); got != want {
			t.Errorf("EnvVarPart(%q) = %q, want %q", in, got, want)
		}
	}
}

// The variable of a source: STAKATER_<NAME>_<KIND>, as Reloader names it
// (its getEnvVarName); a source of another namespace has it before its name.
func TestEnvVarName(t *testing.T) {
	c, err := Parse([]byte(`
sources:
- {name: configmap, group: "", version: v1, resource: configmaps, dataFields: [data, binaryData]}
- {name: secret, group: "", version: v1, resource: secrets, dataFields: [data]}
- {name: secretproviderclasspodstatus, group: secrets-store.csi.x-k8s.io, version: v1, resource: secretproviderclasspodstatuses,
   lifecycle: updatesOnly, nameFrom: status.secretProviderClassName, items: {path: "status.objects[*]", key: id, value: version},
   envVarKind: SECRETPROVIDERCLASS}
- {name: my-kind, group: example.com, version: v1, resource: things, dataFields: [spec]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind                int
		namespace, name, in string
		want                string
	}{
		{0, "shop", "app-config", "shop", "STAKATER_APP_CONFIG_CONFIGMAP"},
		{1, "shop", "db.password", "shop", "STAKATER_DB_PASSWORD_SECRET"},
		{2, "shop", "vault-db", "shop", "STAKATER_VAULT_DB_SECRETPROVIDERCLASS"},
		{3, "shop", "x", "shop", "STAKATER_X_MY_KIND"},
		{0, "base", "app-config", "shop", "STAKATER_BASE_APP_CONFIG_CONFIGMAP"},
	} {
		if got := EnvVarName(c.Sources[tc.kind], tc.namespace, tc.name, tc.in); got != tc.want {
			t.Errorf("%s %s/%s read in %s: %s, want %s", c.Sources[tc.kind].Name, tc.namespace, tc.name, tc.in, got, tc.want)
		}
	}
}

// envVar takes none of the other strategies' fields, and envVarKind names
// only what a variable name can hold.
func TestEnvVarStrategyErrors(t *testing.T) {
	_, err := Parse([]byte(`
sources:
- {name: configmap, group: "", version: v1, resource: configmaps, dataFields: [data], envVarKind: config-map}
- {name: secret, group: "", version: v1, resource: secrets, dataFields: [data]}
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template, restart: {strategy: envVar, field: spec.x}}
`))
	want := []string{
		`sources[0].envVarKind: must be upper-case letters, digits and _, as Reloader's SECRETPROVIDERCLASS, got "config-map"`,
		`workloads[0].restart.field: only the timestampAt strategy reads it; this one is envVar`,
	}
	if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c, err := Parse([]byte(`
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template,
   restart: {byAnnotation: [{value: env-vars, strategy: envVar}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Workloads[0].Restart
	if r.Strategy.Name != TemplateAnnotation || r.StrategyOf("env-vars").Name != EnvVar || !r.Uses(EnvVar) {
		t.Errorf("restart %+v", r)
	}
}
