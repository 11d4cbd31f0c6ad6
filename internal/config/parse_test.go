package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

const examplePath = "../../examples/config.yaml"

func readExample(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestXingPresetIsTheDefault: examples/presets/xing.yaml, which the
// end-to-end suite's controller runs, means the built-in default.
func TestXingPresetIsTheDefault(t *testing.T) {
	raw, err := os.ReadFile("../../examples/presets/xing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	preset, err := Parse(raw)
	if err != nil {
		t.Fatalf("examples/presets/xing.yaml: %v", err)
	}
	defaults, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(preset, defaults) {
		t.Fatalf("examples/presets/xing.yaml differs from the defaults:\n%+v\n%+v", preset, defaults)
	}
}

// TestPresetsParse: every preset is a valid config file.
func TestPresetsParse(t *testing.T) {
	files, err := filepath.Glob("../../examples/presets/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("presets: %v %v", files, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(raw); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestExampleIsTheDefault(t *testing.T) {
	fromExample, err := Parse(readExample(t))
	if err != nil {
		t.Fatalf("examples/config.yaml: %v", err)
	}
	defaults, err := Parse(nil)
	if err != nil {
		t.Fatalf("built-in defaults: %v", err)
	}
	if !reflect.DeepEqual(fromExample, defaults) {
		t.Fatalf("examples/config.yaml and defaults.yaml differ:\n%+v\n%+v", fromExample, defaults)
	}

	want := Settings{
		CheckPeriod:        500 * time.Millisecond,
		GracePeriod:        5 * time.Second,
		MetricsAddress:     "0.0.0.0:10254",
		KubeAPIQPS:         200,
		KubeAPIBurst:       400,
		Workers:            16,
		LogFormat:          "text",
		LeaseNamespace:     "default",
		LeaseName:          "restart-controller",
		LeaseDuration:      15 * time.Second,
		LeaseRenewDeadline: 10 * time.Second,
		LeaseRetryPeriod:   2 * time.Second,
		IgnoredErrors:      []string{},
		ChecksumKeySecret:  "restart-controller-checksum-key",
	}
	if !reflect.DeepEqual(defaults.Settings, want) {
		t.Errorf("settings:\n got %+v\nwant %+v", defaults.Settings, want)
	}
	if defaults.WorkloadSelector.String() != labels.Everything().String() || !defaults.WorkloadSelector.Empty() {
		t.Errorf("WorkloadSelector = %v, want everything", defaults.WorkloadSelector)
	}
	if got := defaults.Annotations.OptIn; got != "com.xing.deployment-restart" {
		t.Errorf("OptIn = %q", got)
	}
	var gvrs []schema.GroupVersionResource
	for _, w := range defaults.Workloads {
		gvrs = append(gvrs, w.GVR)
		if w.PodTemplatePath.String() != "spec.template" && w.GVR.Resource != "cronjobs" {
			t.Errorf("%v: podTemplatePath %v", w.GVR, w.PodTemplatePath)
		}
	}
	wantGVRs := []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Group: "apps", Version: "v1", Resource: "daemonsets"},
		{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"},
		{Group: "batch", Version: "v1", Resource: "cronjobs"},
	}
	if !reflect.DeepEqual(gvrs, wantGVRs) {
		t.Errorf("workloads = %v", gvrs)
	}
	var notRolled []string
	for _, w := range defaults.Workloads {
		var conds []string
		for _, c := range w.NotRolledWhen {
			conds = append(conds, fmt.Sprintf("%s=%#v", c.Path, c.Equals))
		}
		notRolled = append(notRolled, strings.Join(conds, ","))
	}
	wantNotRolled := []string{`spec.paused=true`, `spec.updateStrategy.type="OnDelete"`, `spec.updateStrategy.type="OnDelete"`, ``, ``}
	if !reflect.DeepEqual(notRolled, wantNotRolled) {
		t.Errorf("notRolledWhen = %q, want %q", notRolled, wantNotRolled)
	}
	if !defaults.OrderByResourceVersion {
		t.Error("orderByResourceVersion is off by default")
	}
	if want := (Waves{UnpacedUpTo: 3, FirstWave: 1, Growth: 2, MaxInFlight: 50}); defaults.Waves != want {
		t.Errorf("waves %+v", defaults.Waves)
	}
	if want := (Breaker{Budget: 5, Window: 30 * time.Minute, Quiet: 2 * time.Minute}); defaults.Breaker != want {
		t.Errorf("breaker %+v", defaults.Breaker)
	}
	var rules []string
	for _, w := range defaults.Workloads {
		rules = append(rules, fmt.Sprintf("%s/%s", w.Rollout.Kind, w.Rollout.Deadline))
	}
	if want := []string{"deployment/10m0s", "statefulset/10m0s", "daemonset/10m0s", "argo-rollout/10m0s", "none/10m0s"}; !reflect.DeepEqual(rules, want) {
		t.Errorf("rollout rules %v, want %v", rules, want)
	}
	if a := defaults.Annotations; a.Rollout == "" || a.Hold == "" || a.IgnoreSources == "" || a.Ignore == "" || a.Release == "" {
		t.Errorf("fleet-safety annotation keys missing: %+v", a)
	}
	wantSources := []SourceKind{
		{Name: "configmap", GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, DataFields: []string{"data", "binaryData"}, EnvVarKind: "CONFIGMAP"},
		{Name: "secret", GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, DataFields: []string{"data"}, EnvVarKind: "SECRET"},
	}
	if !reflect.DeepEqual(defaults.Sources, wantSources) {
		t.Errorf("sources = %+v", defaults.Sources)
	}
}

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: ns}
spec:
  template:
    spec:
      volumes:
      - {name: v1, configMap: {name: cm-vol}}
      - {name: v2, configMap: {name: cm-vol-items, optional: true, items: [{key: b, path: b}, {key: a, path: a}]}}
      - {name: v3, secret: {secretName: sec-vol}}
      - {name: v4, secret: {secretName: sec-vol-items, items: [{key: tls.key, path: k}], optional: true}}
      - name: v5
        projected:
          sources:
          - configMap: {name: cm-proj, items: [{key: p, path: p}]}
          - secret: {name: sec-proj, optional: true}
          - serviceAccountToken: {path: token}
      initContainers:
      - name: init
        envFrom: [{configMapRef: {name: cm-init-envfrom}}]
        env: [{name: I, valueFrom: {secretKeyRef: {name: sec-init-key, key: i}}}]
      containers:
      - name: app
        envFrom:
        - configMapRef: {name: cm-envfrom, optional: true}
        - secretRef: {name: sec-envfrom}
        env:
        - {name: PLAIN, value: x}
        - {name: A, valueFrom: {configMapKeyRef: {name: cm-key, key: a}}}
        - {name: B, valueFrom: {secretKeyRef: {name: sec-key, key: b, optional: true}}}
      ephemeralContainers:
      - name: debug
        envFrom: [{secretRef: {name: sec-eph-envfrom}}]
        env: [{name: E, valueFrom: {configMapKeyRef: {name: cm-eph-key, key: e}}}]
`

func TestExampleExtractsEveryForm(t *testing.T) {
	c, err := Parse(readExample(t))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]interface{}
	if err := yaml.Unmarshal([]byte(deployment), &obj); err != nil {
		t.Fatal(err)
	}
	template, ok := c.Workloads[0].PodTemplatePath.Object(obj)
	if !ok {
		t.Fatal("no pod template")
	}
	podSpec, _ := template["spec"].(map[string]interface{})
	var got []refs.Ref
	for _, e := range c.Extractors {
		got = e.Extract(podSpec, got)
	}
	want := []refs.Ref{
		{Kind: "configmap", Name: "cm-vol"},
		{Kind: "configmap", Name: "cm-vol-items", Keys: []string{"a", "b"}, Optional: true},
		{Kind: "configmap", Name: "cm-proj", Keys: []string{"p"}},
		{Kind: "secret", Name: "sec-vol"},
		{Kind: "secret", Name: "sec-vol-items", Keys: []string{"tls.key"}, Optional: true},
		{Kind: "secret", Name: "sec-proj", Optional: true},
		{Kind: "configmap", Name: "cm-envfrom", Optional: true},
		{Kind: "configmap", Name: "cm-init-envfrom"},
		{Kind: "secret", Name: "sec-envfrom"},
		{Kind: "secret", Name: "sec-eph-envfrom"},
		{Kind: "configmap", Name: "cm-key", Keys: []string{"a"}},
		{Kind: "configmap", Name: "cm-eph-key", Keys: []string{"e"}},
		{Kind: "secret", Name: "sec-key", Keys: []string{"b"}, Optional: true},
		{Kind: "secret", Name: "sec-init-key", Keys: []string{"i"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("refs:\n got %+v\nwant %+v", got, want)
	}
}

// errorLines returns the problems in err, one a line, without the wrapping.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg, ok := strings.CutPrefix(err.Error(), "parsing config: ")
	if !ok {
		t.Fatalf("error %q does not say what was being done", err)
	}
	return strings.Split(msg, "\n")
}

const twoWorkloads = `
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
- {group: apps, version: v1, resource: statefulsets, podTemplatePath: spec.template}
`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{
			name: "bad pod template path",
			file: twoWorkloads[:len(twoWorkloads)-1] + `
- {group: apps, version: v1, resource: daemonsets, podTemplatePath: "spec.tem[0]"}`,
			want: []string{`workloads[2].podTemplatePath: unexpected character '[' at offset 8: only [*] is supported`},
		},
		{
			// What koanf's decoding (mapstructure) would get wrong alone
			// (decode.go): two unknown keys of one map in one message, a
			// fraction truncated into an integer, a key matched without its
			// case, and mismatches named by Go types.
			name: "decoded strictly",
			file: `
workers: 1.5
kubeAPIBurst: 1152921504606846976
references:
- {source: configmap, from: ["volumes[*].configMap"], Name: name, nmae: x, sourc: y}
waves: []
namespaces: {a: b}
leaderElection: {enabled: "yes"}
kubeAPIQPS: fast
ignoredErrors: [1]`,
			want: []string{
				`ignoredErrors[0]: must be a string, got number 1`,
				`kubeAPIBurst: must be an integer, got number 1152921504606846976`,
				`kubeAPIQPS: must be a number, got string "fast"`,
				`leaderElection.enabled: must be a boolean, got string "yes"`,
				`namespaces: must be a list, got a map`,
				`references[0].Name: unknown field`,
				`references[0].name: required`,
				`references[0].nmae: unknown field`,
				`references[0].sourc: unknown field`,
				`waves: must be a map, got a list`,
				`workers: must be an integer, got number 1.5`,
			},
		},
		{
			name: "settings beyond their bounds",
			file: `
restartCheckPeriod: 1ns
restartGracePeriod: 48h
workers: 100000000
kubeAPIQPS: .inf
kubeAPIBurst: 1000000
metricsAddress: "0.0.0.0:99999"
leaderElection: {leaseDuration: 1ns, renewDeadline: 1ns, retryPeriod: 1ns}`,
			want: []string{
				`kubeAPIBurst: must be between 1 and 100000, got 1000000`,
				`kubeAPIQPS: must be more than 0 and at most 10000`,
				`leaderElection.leaseDuration: must be between 1s and 10m0s, got 1ns`,
				`leaderElection.retryPeriod: must be between 100ms and 10m0s, got 1ns`,
				`metricsAddress: port must be a number from 0 to 65535, got "99999"`,
				`restartCheckPeriod: must be between 10ms and 1h0m0s, got 1ns`,
				`restartGracePeriod: must be between 0s and 24h0m0s, got 48h0m0s`,
				`workers: must be between 1 and 1000, got 100000000`,
			},
		},
		{
			name: "annotation keys collide",
			file: `
annotations:
  optIn: example.com/restart
  appliedChecksums: example.com/restart
  restartTimestamp: example.com/stamp
  appliedTemplateHash: example.com/stamp`,
			want: []string{
				`annotations.appliedChecksums: must differ from annotations.optIn (both "example.com/restart")`,
				`annotations.appliedTemplateHash: must differ from annotations.restartTimestamp (both "example.com/stamp")`,
			},
		},
		{
			name: "fleet safety out of bounds",
			file: `
annotations: {hold: com.xing.deployment-restart.rollout, release: ""}
waves: {unpacedUpTo: -1, firstWave: 0, growth: 0.5, maxInFlight: 0}
breaker: {budget: 1001, window: 0s, quiet: -1s}
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template, rollout: {status: deploy, deadline: 100ms}}
- {group: apps, version: v1, resource: daemonsets, podTemplatePath: spec.template, rollout: {readyConditions: [Ready]}}
- {group: example.com, version: v1, resource: widgets, podTemplatePath: spec.template, rollout: {readyConditions: [""], deadline: 48h}}`,
			want: []string{
				`annotations.hold: must differ from annotations.rollout (both "com.xing.deployment-restart.rollout")`,
				`annotations.release: required`,
				`breaker.budget: must be between 0 and 1000, got 1001`,
				`breaker.quiet: must be between 0s and 24h0m0s, got -1s`,
				`breaker.window: must be between 1s and 24h0m0s, got 0s`,
				`waves.firstWave: must be between 1 and 100000, got 0`,
				`waves.growth: must be between 1 and 10, got 0.5`,
				`waves.maxInFlight: must be between 1 and 100000, got 0`,
				`waves.unpacedUpTo: must be between 0 and 100000, got -1`,
				`workloads[0].rollout.deadline: must be between 1s and 24h0m0s, got 100ms`,
				`workloads[0].rollout.status: must be one of deployment, statefulset, daemonset, argo-rollout, deploymentconfig, conditions, none, job, got "deploy"`,
				`workloads[1].rollout.readyConditions: only the conditions rule reads them; this kind's rule is daemonset`,
				`workloads[2].rollout.deadline: must be between 1s and 24h0m0s, got 48h0m0s`,
				`workloads[2].rollout.readyConditions[0]: must not be empty`,
			},
		},
		{
			name: "wildcard pod template path",
			file: `workloads: [{group: apps, version: v1, resource: deployments, podTemplatePath: "spec.templates[*]"}]`,
			want: []string{`workloads[0].podTemplatePath: must not contain [*]: a workload has one pod template`},
		},
		{
			name: "misspelled key",
			file: `
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
- {group: apps, version: v1, resource: statefulsets, podTmplatePath: spec.template}`,
			want: []string{
				`workloads[1].podTemplatePath: required`,
				`workloads[1].podTmplatePath: unknown field`,
			},
		},
		{
			name: "unknown keys everywhere",
			file: `
restartPeriod: 1
leaderElection: {enabled: true, lease: x}
references: [{source: configmap, from: [volumes], name: name, nmae: x}]`,
			want: []string{
				`leaderElection.lease: unknown field`,
				`references[0].nmae: unknown field`,
				`restartPeriod: unknown field`,
			},
		},
		{
			name: "resource names",
			file: `
sources:
- {name: configmap, version: v1, resource: ConfigMaps, dataFields: [data]}
- {name: secret, group: "Not_A_Group", version: V1, resource: secrets, dataFields: [data]}`,
			want: []string{
				`sources[0].resource: must be a lowercase plural resource name, got "ConfigMaps"`,
				`sources[1].group: must be empty (the core group) or a DNS subdomain such as apps, got "Not_A_Group"`,
				`sources[1].version: must be a lowercase version such as v1, got "V1"`,
			},
		},
		{
			name: "required parts",
			file: `
sources: [{name: configmap, dataFields: []}, {dataFields: [""], version: v1, resource: secrets}]
workloads: [{group: apps, resource: deployments, podTemplatePath: spec.template}]
references: [{source: configmap, from: [volumes]}]`,
			want: []string{
				`references[0].name: required`,
				`sources[0].dataFields: required`,
				`sources[0].resource: required`,
				`sources[0].version: required`,
				`sources[1].dataFields[0]: must not be empty`,
				`sources[1].name: required`,
				`workloads[0].version: required`,
			},
		},
		{
			name: "opt-in and source-list annotations",
			file: `
optInAnnotations:
- {annotation: reloader.stakater.com/auto}
- {annotation: com.xing.deployment-restart.ignore, sources: [configmap, cm]}
- {annotation: reloader.stakater.com/auto, sourceAnnotation: com.xing.deployment-restart.release}
- {annotation: "", sourceAnnotation: "bad key!", valu: "true"}
sourceListAnnotations:
- {annotation: example.com/reload, source: configmap}
- {annotation: example.com/reload}
- {annotation: example.com/regex, source: secret, match: regexp}
- {annotation: example.com/exact, source: secret, match: exact}
- {annotation: example.com/pattern, source: secret, match: regex}`,
			want: []string{
				`optInAnnotations[1].annotation: must differ from annotations.ignore (both "com.xing.deployment-restart.ignore")`,
				`optInAnnotations[1].sources[1]: unknown source kind "cm" (known: configmap, secret)`,
				`optInAnnotations[2].annotation: must differ from optInAnnotations[0].annotation (both "reloader.stakater.com/auto")`,
				`optInAnnotations[2].sourceAnnotation: must differ from annotations.release (both "com.xing.deployment-restart.release")`,
				`optInAnnotations[3].annotation: required`,
				`optInAnnotations[3].sourceAnnotation: invalid "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`optInAnnotations[3].valu: unknown field`,
				`sourceListAnnotations[1].annotation: must differ from sourceListAnnotations[0].annotation (both "example.com/reload")`,
				`sourceListAnnotations[1].source: required`,
				`sourceListAnnotations[2].match: must be exact or regex, got "regexp"`,
			},
		},
		{
			name: "where annotations are read, boolean values, exclude lists, opt-in-all",
			file: `
optInAll: "yes"
optInAnnotations:
- {annotation: example.com/auto, readFrom: pod-template, parseBool: true, value: "1"}
- {annotation: example.com/typed, readFrom: Both, parseBool: "true", optOut: 1}
- {annotation: example.com/ok, readFrom: podTemplate, parseBool: true, optOut: true}
sourceListAnnotations:
- {annotation: example.com/reload, source: configmap, readFrom: template}
excludeAnnotations:
- {annotation: example.com/exclude, source: cm, readFrom: both}
- {annotation: example.com/auto, source: secret}
- {annotation: com.xing.deployment-restart.timestamp, source: configmap}
- {source: secret}
- "example.com/exclude"`,
			want: []string{
				`excludeAnnotations[0].readFrom: unknown field`,
				`excludeAnnotations[0].source: unknown source kind "cm" (known: configmap, secret)`,
				`excludeAnnotations[1].annotation: must differ from optInAnnotations[0].annotation (both "example.com/auto")`,
				`excludeAnnotations[2].annotation: must differ from annotations.restartTimestamp (both "com.xing.deployment-restart.timestamp")`,
				`excludeAnnotations[3].annotation: required`,
				`excludeAnnotations[4]: must be a map, got string "example.com/exclude"`,
				`optInAll: must be a boolean, got string "yes"`,
				`optInAnnotations[0].readFrom: must be workload, podTemplate or both, got "pod-template"`,
				`optInAnnotations[0].value: must be left out with parseBool: true, which opts in on every value strconv.ParseBool reads as true; got "1"`,
				`optInAnnotations[1].optOut: must be a boolean, got number 1`,
				`optInAnnotations[1].parseBool: must be a boolean, got string "true"`,
				`optInAnnotations[1].readFrom: must be workload, podTemplate or both, got "Both"`,
				`sourceListAnnotations[0].readFrom: must be workload, podTemplate or both, got "template"`,
			},
		},
		{
			name: "source lifecycle, metrics, ignore annotations",
			file: `
sourceLifecycle: {restartOnCreate: "no", restartOnDelet: true}
metrics: {reloaderByNamespace: true}
ignoreAnnotations:
- {annotation: com.xing.deployment-restart.ignore}
- {annotation: ""}
- {annotation: example.com/ignore, value: "yes"}`,
			want: []string{
				`ignoreAnnotations[0].annotation: must differ from annotations.ignore (both "com.xing.deployment-restart.ignore")`,
				`ignoreAnnotations[1].annotation: required`,
				`ignoreAnnotations[2].value: unknown field`,
				`metrics.reloaderByNamespace: needs metrics.reloaderCompatible: true`,
				`sourceLifecycle.restartOnCreate: must be a boolean, got string "no"`,
				`sourceLifecycle.restartOnDelet: unknown field`,
			},
		},
		{
			name: "unknown config kind",
			file: `
references:
- {source: configmap, from: [a], name: name}
- {source: configmap, from: [b], name: name}
- {source: secret, from: [c], name: name}
- {source: secret, from: [d], name: name}
- {source: configmapz, from: [e], name: name}`,
			want: []string{`references[4].source: unknown source kind "configmapz" (known: configmap, secret)`},
		},
		{
			name: "reference paths",
			file: `references: [{source: configmap, from: [ok, "a..b"], name: "x[*]", keys: "k[", optional: "o o"}]`,
			want: []string{
				`references[0].from[1]: empty segment at offset 2`,
				`references[0].keys: unexpected character '[' at offset 1: only [*] is supported`,
				`references[0].name: must not contain [*]`,
				`references[0].optional: unexpected character ' ' at offset 1`,
			},
		},
		{
			name: "duplicates",
			file: `
sources:
- {name: configmap, version: v1, resource: configmaps, dataFields: [data]}
- {name: configmap, version: v1, resource: secrets, dataFields: [data]}
- {name: other, version: v1, resource: configmaps, dataFields: [data]}
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
references: [{source: configmap, from: [a], name: name}]
namespaces: [a, b, a]`,
			want: []string{
				`namespaces[2]: duplicate namespace "a" (also namespaces[0])`,
				`sources[1].name: duplicate source kind "configmap" (also sources[0])`,
				`sources[2]: duplicate resource /v1, Resource=configmaps (also sources[0])`,
				`workloads[1]: duplicate resource apps/v1, Resource=deployments (also workloads[0])`,
			},
		},
		{
			name: "empty lists",
			file: `{sources: [], workloads: null, references: []}`,
			want: []string{
				`references: at least one reference form is required`,
				`sources: at least one source kind is required`,
				`workloads: at least one workload kind is required`,
			},
		},
		{
			name: "settings",
			file: `
restartGracePeriod: -1
restartCheckPeriod: 0
ignoredErrors: [a, ""]
metricsAddress: localhost
kubeAPIQPS: 0
kubeAPIBurst: 0
workers: 0
logFormat: xml
leaderElection: {namespace: Bad_NS, leaseName: "", renewDeadline: 20s}`,
			want: []string{
				`ignoredErrors[1]: must not be empty`,
				`kubeAPIBurst: must be between 1 and 100000, got 0`,
				`kubeAPIQPS: must be more than 0 and at most 10000`,
				`leaderElection.leaseName: required`,
				`leaderElection.namespace: invalid "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
				`leaderElection.renewDeadline: must be less than leaseDuration (15s)`,
				`logFormat: must be text or json, got "xml"`,
				`metricsAddress: must be host:port: address localhost: missing port in address`,
				`restartCheckPeriod: must be between 10ms and 1h0m0s, got 0s`,
				`restartGracePeriod: must be between 0s and 24h0m0s, got -1s`,
				`workers: must be between 1 and 1000, got 0`,
			},
		},
		{
			name: "lease retry period",
			file: `leaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 9s}`,
			want: []string{`leaderElection.retryPeriod: must be less than renewDeadline (10s) / 1.2`},
		},
		{
			name: "selector and annotations",
			file: `
workloadSelector: "a in (b"
sourceSelector: "re load=x"
namespaceSelector: "env in"
annotations: {optIn: "-bad-", appliedChecksums: "", restartTimestamp: example.com/ok}`,
			want: []string{
				`annotations.appliedChecksums: required`,
				`annotations.optIn: invalid "-bad-": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`namespaceSelector: unable to parse requirement: found '' expected: '('`,
				`sourceSelector: unable to parse requirement: found 'load', expected: in, notin, =, ==, !=, gt, lt`,
				`workloadSelector: unable to parse requirement: found '', expected: ',' or ')'`,
			},
		},
		{
			name: "ignored namespaces",
			file: `
namespaces: [a, b]
ignoredNamespaces: [b, Bad, c, c]`,
			want: []string{
				`ignoredNamespaces[0]: namespace "b" is also in namespaces[1]: it cannot be both watched and ignored`,
				`ignoredNamespaces[1]: invalid "Bad": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
				`ignoredNamespaces[3]: duplicate namespace "c" (also ignoredNamespaces[2])`,
			},
		},
		{
			name: "type mismatches are not also reported as missing",
			file: `
workers: "4"
verbose: "yes"
kubeAPIQPS: fast
restartGracePeriod: [1]
namespaces: default
leaderElection: {enabled: 1, leaseDuration: 15}
annotations: [x]
sources: {name: configmap}
workloads: [{group: apps, version: 1, resource: deployments, podTemplatePath: spec.template}, x]
references: [{source: configmap, from: volumes, name: name}]`,
			want: []string{
				`annotations: must be a map, got a list`,
				`kubeAPIQPS: must be a number, got string "fast"`,
				`leaderElection.enabled: must be a boolean, got number 1`,
				`leaderElection.leaseDuration: must be a Go duration like "15s", got number 15`,
				`namespaces: must be a list, got string "default"`,
				`references[0].from: must be a list, got string "volumes"`,
				`restartGracePeriod: must be a number of seconds or a Go duration like "500ms", got a list`,
				`sources: must be a list, got a map`,
				`verbose: must be a boolean, got string "yes"`,
				`workers: must be an integer, got string "4"`,
				`workloads[0].version: must be a string, got number 1`,
				`workloads[1]: must be a map, got string "x"`,
			},
		},
		{
			name: "numbers",
			file: `{workers: 2.5, kubeAPIBurst: 1e300}`,
			want: []string{
				`kubeAPIBurst: must be an integer, got number 1e+300`,
				`workers: must be an integer, got number 2.5`,
			},
		},
		{
			name: "notRolledWhen conditions",
			file: `
orderByResourceVersion: "yes"
workloads:
- group: apps
  version: v1
  resource: deployments
  podTemplatePath: spec.template
  notRolledWhen:
  - {path: spec.paused, equals: true}
  - {path: "spec.containers[*].x", equals: 1}
  - {path: spec.a}
  - {equals: OnDelete}
  - {path: spec.b, equals: {x: 1}}
  - {path: spec.c, equals: [OnDelete]}
  - {path: spec.d, equals: x, other: y}
  - {path: spec.e, equals: x, noElement: {path: type, equals: y}}
  - {path: spec.f, noElement: {equals: y}}
  - {path: spec.g, noElement: {path: "a[*]", equals: y, x: 1}}
  - {path: spec.h, noElement: {path: type}}
  - {noElement: {path: type, equals: {}}}`,
			want: []string{
				`orderByResourceVersion: must be a boolean, got string "yes"`,
				`workloads[0].notRolledWhen[1].path: must not contain [*]: a condition reads one value`,
				`workloads[0].notRolledWhen[2].equals: required (or noElement)`,
				`workloads[0].notRolledWhen[3].path: required`,
				`workloads[0].notRolledWhen[4].equals: must be a string, boolean or number, got a map`,
				`workloads[0].notRolledWhen[5].equals: must be a string, boolean or number, got a list`,
				`workloads[0].notRolledWhen[6].other: unknown field`,
				`workloads[0].notRolledWhen[7]: has both equals and noElement; give one`,
				`workloads[0].notRolledWhen[8].noElement.path: required`,
				`workloads[0].notRolledWhen[9].noElement.path: must not contain [*]: a condition reads one value`,
				`workloads[0].notRolledWhen[9].noElement.x: unknown field`,
				`workloads[0].notRolledWhen[10].noElement.equals: required`,
				`workloads[0].notRolledWhen[11].noElement.equals: must be a string, boolean or number, got a map`,
				`workloads[0].notRolledWhen[11].path: required`,
			},
		},
		{
			name: "sorted with indexes in numeric order",
			file: `
workloads:
- {group: apps, version: v1, resource: r0, podTemplatePath: a}
- {group: apps, version: v1, resource: r1, podTemplatePath: a}
- {group: apps, version: v1, resource: r2, podTemplatePath: a}
- {group: apps, version: v1, resource: r3, podTemplatePath: a}
- {group: apps, version: v1, resource: r4, podTemplatePath: a}
- {group: apps, version: v1, resource: r5, podTemplatePath: a}
- {group: apps, version: v1, resource: r6, podTemplatePath: a}
- {group: apps, version: v1, resource: r7, podTemplatePath: a}
- {group: apps, version: v1, resource: r8, podTemplatePath: a}
- {group: apps, version: v1, resource: r9, podTemplatePath: a}
- {group: apps, version: v1, resource: r10, podTemplatePath: a, x: 1}
- {group: apps, version: v1, resource: r11, podTemplatePath: a}
- {group: apps, version: "", resource: r12, podTemplatePath: a}
workers: 0`,
			want: []string{
				`workers: must be between 1 and 1000, got 0`,
				`workloads[10].x: unknown field`,
				`workloads[12].version: required`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.file))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if got := errorLines(t, err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestParseYAMLErrors(t *testing.T) {
	for _, file := range []string{"[1, 2]", "workers: [", "a: 1\na: 2", "\tx",
		// A second document would be dropped silently by the parser.
		"workers: 3\n---\nworkers: 4\n", "---\nworkers: 3\n---\n# only a comment\nnamespaces: [a]\n"} {
		if _, err := Parse([]byte(file)); err == nil || !strings.HasPrefix(err.Error(), "parsing config: parsing YAML: ") {
			t.Errorf("Parse(%q) error = %v", file, err)
		}
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		file  string
		grace time.Duration
		check time.Duration
		err   string
	}{
		{file: `restartGracePeriod: 5`, grace: 5 * time.Second},
		{file: `restartGracePeriod: "5"`, grace: 5 * time.Second},
		{file: `restartGracePeriod: 500ms`, grace: 500 * time.Millisecond},
		{file: `restartGracePeriod: 0`, grace: 0},
		{file: `restartGracePeriod: "0"`, grace: 0},
		{file: `restartGracePeriod: 1.5`, grace: 1500 * time.Millisecond},
		{file: `restartGracePeriod: 1m`, grace: time.Minute},
		{file: `restartGracePeriod: -1s`, err: `restartGracePeriod: must be between 0s and 24h0m0s, got -1s`},
		{file: `restartGracePeriod: soon`, err: `restartGracePeriod: must be a number of seconds or a Go duration like "500ms", got string "soon"`},
		{file: `restartGracePeriod: NaN`, err: `restartGracePeriod: out of range: string "NaN"`},
		{file: `restartGracePeriod: 1e300`, err: `restartGracePeriod: out of range: number 1e+300`},
		{file: `restartCheckPeriod: 500`, check: 500 * time.Millisecond},
		{file: `restartCheckPeriod: 250ms`, check: 250 * time.Millisecond},
		{file: `restartCheckPeriod: "2s"`, check: 2 * time.Second},
		{file: `restartCheckPeriod: 0`, err: `restartCheckPeriod: must be between 10ms and 1h0m0s, got 0s`},
		{file: `restartCheckPeriod: true`, err: `restartCheckPeriod: must be a number of milliseconds or a Go duration like "250ms", got boolean true`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := Parse([]byte(tt.file))
			if tt.err != "" {
				if got := errorLines(t, err); len(got) != 1 || got[0] != tt.err {
					t.Fatalf("error = %q, want %q", got, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantGrace, wantCheck := 5*time.Second, 500*time.Millisecond
			if strings.HasPrefix(tt.file, "restartGracePeriod") {
				wantGrace = tt.grace
			} else {
				wantCheck = tt.check
			}
			if c.Settings.GracePeriod != wantGrace || c.Settings.CheckPeriod != wantCheck {
				t.Errorf("grace %v, check %v; want %v, %v", c.Settings.GracePeriod, c.Settings.CheckPeriod, wantGrace, wantCheck)
			}
		})
	}
}

func TestLessPath(t *testing.T) {
	sorted := []string{"a", "a.b", "a[2]", "a[10]", "a[10].b", "b", "workloads[2].x", "workloads[10]"}
	for i := range sorted {
		for j := range sorted {
			if got, want := lessPath(sorted[i], sorted[j]), i < j; got != want {
				t.Errorf("lessPath(%q, %q) = %v, want %v", sorted[i], sorted[j], got, want)
			}
		}
	}
}

func TestOneDocumentWithMarkersParses(t *testing.T) {
	for _, file := range []string{"---\nworkers: 3\n", "workers: 3\n...\n"} {
		c, err := Parse([]byte(file))
		if err != nil || c.Settings.Workers != 3 {
			t.Errorf("Parse(%q) = %v, %v; want workers 3", file, c, err)
		}
	}
}

// A condition compares the value at its path: numbers by value whatever
// their Go type (JSON gives int64 or float64, YAML int), strings and booleans
// exactly; a missing value or one of another type never holds.
func TestConditionHolds(t *testing.T) {
	c, err := Parse([]byte(`
workloads:
- group: example.com
  version: v1
  resource: things
  podTemplatePath: spec.template
  notRolledWhen:
  - {path: spec.replicasOnHold, equals: 3}
  - {path: spec.mode, equals: manual}
  - {path: spec.frozen, equals: true}`))
	if err != nil {
		t.Fatal(err)
	}
	conds := c.Workloads[0].NotRolledWhen
	if len(conds) != 3 {
		t.Fatalf("conditions %v", conds)
	}
	number, str, boolean := conds[0], conds[1], conds[2]
	for _, tc := range []struct {
		cond Condition
		obj  map[string]interface{}
		want bool
	}{
		{number, spec("replicasOnHold", int64(3)), true},
		{number, spec("replicasOnHold", float64(3)), true},
		{number, spec("replicasOnHold", 3), true},
		{number, spec("replicasOnHold", int64(4)), false},
		{number, spec("replicasOnHold", "3"), false},
		{number, spec("other", int64(3)), false},
		{str, spec("mode", "manual"), true},
		{str, spec("mode", "Manual"), false},
		{boolean, spec("frozen", true), true},
		{boolean, spec("frozen", false), false},
		{boolean, spec("frozen", "true"), false},
		{boolean, map[string]interface{}{"spec": "frozen"}, false},
	} {
		if got := tc.cond.Holds(tc.obj); got != tc.want {
			t.Errorf("%s on %v: %v, want %v", tc.cond, tc.obj, got, tc.want)
		}
	}
	if got := str.String(); got != "spec.mode is manual" {
		t.Errorf("String() = %q", got)
	}
}

// A noElement condition holds when no element of the list has the value:
// an OpenShift DeploymentConfig without a ConfigChange trigger. A missing or
// null list has no element; a value that is not a list says nothing.
func TestConditionNoElement(t *testing.T) {
	c, err := Parse([]byte(`
workloads:
- group: apps.openshift.io
  version: v1
  resource: deploymentconfigs
  podTemplatePath: spec.template
  notRolledWhen:
  - {path: spec.triggers, noElement: {path: type, equals: ConfigChange}}`))
	if err != nil {
		t.Fatal(err)
	}
	cond := c.Workloads[0].NotRolledWhen[0]
	trigger := func(typ string) interface{} { return map[string]interface{}{"type": typ} }
	for _, tc := range []struct {
		name string
		obj  map[string]interface{}
		want bool
	}{
		{"a ConfigChange trigger", spec("triggers", []interface{}{trigger("ImageChange"), trigger("ConfigChange")}), false},
		{"only an ImageChange trigger", spec("triggers", []interface{}{trigger("ImageChange")}), true},
		{"an empty list", spec("triggers", []interface{}{}), true},
		{"no list", spec("replicas", int64(1)), true},
		{"a null list", spec("triggers", nil), true},
		{"elements that are no maps", spec("triggers", []interface{}{"ConfigChange"}), true},
		{"not a list", spec("triggers", "ConfigChange"), false},
	} {
		if got := cond.Holds(tc.obj); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got, want := cond.String(), "spec.triggers has no element whose type is ConfigChange"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func spec(key string, v interface{}) map[string]interface{} {
	return map[string]interface{}{"spec": map[string]interface{}{key: v}}
}

// A kind added by configuration declares how its status is read; one that
// says nothing gets the generic rule and the default deadline.
func TestRolloutRules(t *testing.T) {
	c, err := Parse([]byte(`
workloads:
- {group: example.com, version: v1, resource: widgets, podTemplatePath: spec.template,
   rollout: {status: conditions, readyConditions: [Synced, Ready], deadline: 15m}}
- {group: example.com, version: v1, resource: gadgets, podTemplatePath: spec.template}
- {group: batch, version: v1, resource: cronjobs, podTemplatePath: spec.jobTemplate.spec.template, rollout: {status: none}}
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template, rollout: {deadline: 30s}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []rollout.Rule{
		{Kind: rollout.KindConditions, ReadyConditions: []string{"Synced", "Ready"}, Deadline: 15 * time.Minute},
		{Kind: rollout.KindConditions, Deadline: rollout.DefaultDeadline},
		{Kind: rollout.KindNone, Deadline: rollout.DefaultDeadline},
		{Kind: rollout.KindDeployment, Deadline: 30 * time.Second},
	}
	for i, w := range c.Workloads {
		if !reflect.DeepEqual(w.Rollout, want[i]) {
			t.Errorf("workloads[%d].rollout = %+v, want %+v", i, w.Rollout, want[i])
		}
	}
}

// Creations and deletions of optional sources restart their readers by
// default; each can be turned off alone.
func TestSourceLifecycleDefaults(t *testing.T) {
	cfg, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SourceLifecycle{RestartOnCreate: true, RestartOnDelete: true}); !reflect.DeepEqual(cfg.SourceLifecycle, want) {
		t.Errorf("default %+v, want %+v", cfg.SourceLifecycle, want)
	}
	cfg, err = Parse([]byte("sourceLifecycle: {restartOnCreate: false}"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (SourceLifecycle{RestartOnDelete: true}); !reflect.DeepEqual(cfg.SourceLifecycle, want) {
		t.Errorf("got %+v, want %+v", cfg.SourceLifecycle, want)
	}
}
