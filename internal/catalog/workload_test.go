package catalog

import (
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// everyForm is a Deployment naming sources in every form the example source
// knows, with sources named more than once to exercise merging.
const everyForm = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: 5d6f0000-0000-4000-8000-000000000002
  resourceVersion: "42"
  generation: 3
  annotations:
    com.xing.deployment-restart: enabled
    com.xing.deployment-restart.applied-config-checksums: '{"configmap/shop/keyed":"0123456789abcdef"}'
    com.xing.deployment-restart.applied-template-hash: fedcba9876543210
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
    spec:
      volumes:
      # keyed volume, required; also read by key from env below (optional there)
      - name: v1
        configMap:
          name: keyed
          items: [{key: b.yaml, path: b}, {key: a.yaml, path: a}]
      # whole-object volume, optional; also read by one key: whole wins
      - name: v2
        configMap: {name: whole-and-key, optional: true}
      # projected configMap and secret sources
      - name: v3
        projected:
          sources:
          - configMap:
              name: opt
              optional: true
              items: [{key: k, path: k}]
          - secret:
              name: proj-secret
              items: [{key: token, path: token}]
      - name: v4
        secret:
          secretName: tls
          items: [{key: tls.key, path: key}, {key: tls.crt, path: crt}]
          optional: false
      - name: not-a-source
        emptyDir: {}
      initContainers:
      - name: init
        image: busybox:1
        envFrom:
        - secretRef: {name: init-secret, optional: true}
        env:
        - name: M
          valueFrom:
            configMapKeyRef: {name: opt, key: m, optional: true}
      containers:
      - name: app
        image: shop/web:1.0
        envFrom:
        - configMapRef: {name: env-all}
        - prefix: X_
          configMapRef: {name: keyed, optional: true}
        env:
        - name: C
          valueFrom:
            configMapKeyRef: {name: keyed, key: c.yaml, optional: true}
        - name: W
          valueFrom:
            configMapKeyRef: {name: whole-and-key, key: w}
        - name: PW
          valueFrom:
            secretKeyRef: {name: db, key: password}
        - name: USER
          valueFrom:
            secretKeyRef: {name: db, key: user, optional: true}
        - name: PLAIN
          value: x
      ephemeralContainers:
      - name: debug
        image: busybox:1
        envFrom:
        - configMapRef: {name: eph-from, optional: true}
        env:
        - name: E
          valueFrom:
            secretKeyRef: {name: db, key: user}
`

func reduceWorkloadOf(t *testing.T, cfg *config.Config, u *unstructured.Unstructured) *WorkloadState {
	t.Helper()
	out, err := ReduceWorkload(deploymentKind(t, cfg), cfg)(u)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := out.(*WorkloadState)
	if !ok {
		t.Fatalf("ReduceWorkload returned %T, want *WorkloadState", out)
	}
	return w
}

func TestReduceWorkloadEveryReferenceForm(t *testing.T) {
	cfg := exampleConfig(t)
	u := fromYAML(t, everyForm)
	before := u.DeepCopy()
	w := reduceWorkloadOf(t, cfg, u)

	if !reflect.DeepEqual(u, before) {
		t.Error("ReduceWorkload modified the informer's object")
	}
	if w.Name != "web" || w.Namespace != "shop" || w.ResourceVersion != "42" ||
		w.UID != "5d6f0000-0000-4000-8000-000000000002" || w.GroupVersionKind() != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) {
		t.Errorf("identity not kept: %+v %+v", w.GroupVersionKind(), w.Meta)
	}
	if len(w.Annotations) != 0 || len(w.GetLabels()) != 0 {
		t.Errorf("annotations/labels kept in the cache: %v %v", w.Annotations, w.GetLabels())
	}
	if !w.OptedIn {
		t.Error("not opted in")
	}
	if !w.HasApplied || w.Applied != `{"configmap/shop/keyed":"0123456789abcdef"}` {
		t.Errorf("applied = %q (has %v)", w.Applied, w.HasApplied)
	}
	if w.AppliedTemplateHash != "fedcba9876543210" {
		t.Errorf("applied template hash = %q", w.AppliedTemplateHash)
	}
	if w.Problem != "" {
		t.Errorf("problem: %s", w.Problem)
	}
	if len(w.TemplateHash) != 16 {
		t.Errorf("template hash %q, want 16 hex characters", w.TemplateHash)
	}

	cm := func(name string) SourceID { return SourceID{Kind: "configmap", Namespace: "shop", Name: name} }
	sec := func(name string) SourceID { return SourceID{Kind: "secret", Namespace: "shop", Name: name} }
	want := []Reference{
		// envFrom only, required
		{ID: cm("env-all")},
		// ephemeral container envFrom, optional
		{ID: cm("eph-from"), Optional: true},
		// keyed volume (required) + envFrom (optional, whole) + env key (optional): whole, required
		{ID: cm("keyed")},
		// projected (optional, k) + init env (optional, m): keys merged, optional
		{ID: cm("opt"), Keys: []string{"k", "m"}, Optional: true},
		// whole volume (optional) + env key (required): whole, required
		{ID: cm("whole-and-key")},
		// env keys password (required) + user (optional) + ephemeral user (required)
		{ID: sec("db"), Keys: []string{"password", "user"}},
		// init envFrom, optional
		{ID: sec("init-secret"), Optional: true},
		// projected secret, required
		{ID: sec("proj-secret"), Keys: []string{"token"}},
		// secret volume with items, optional: false; keys sorted
		{ID: sec("tls"), Keys: []string{"tls.crt", "tls.key"}},
	}
	if !reflect.DeepEqual(w.References, want) {
		t.Errorf("references:\n got %+v\nwant %+v", w.References, want)
	}
}

func TestReduceWorkloadMergesKeysAndOptional(t *testing.T) {
	cfg := exampleConfig(t)
	cases := []struct {
		name string
		env  string // YAML list of env entries of the only container
		want []Reference
	}{
		{"keys unioned and sorted", `
        - {name: A, valueFrom: {configMapKeyRef: {name: c, key: z}}}
        - {name: B, valueFrom: {configMapKeyRef: {name: c, key: a}}}
        - {name: C, valueFrom: {configMapKeyRef: {name: c, key: z}}}`,
			[]Reference{{ID: SourceID{"configmap", "shop", "c"}, Keys: []string{"a", "z"}}}},
		{"all optional stays optional", `
        - {name: A, valueFrom: {configMapKeyRef: {name: c, key: a, optional: true}}}
        - {name: B, valueFrom: {configMapKeyRef: {name: c, key: b, optional: true}}}`,
			[]Reference{{ID: SourceID{"configmap", "shop", "c"}, Keys: []string{"a", "b"}, Optional: true}}},
		{"one required use makes it required", `
        - {name: A, valueFrom: {configMapKeyRef: {name: c, key: a, optional: true}}}
        - {name: B, valueFrom: {configMapKeyRef: {name: c, key: b, optional: false}}}`,
			[]Reference{{ID: SourceID{"configmap", "shop", "c"}, Keys: []string{"a", "b"}}}},
		{"same name, different kinds stay apart", `
        - {name: A, valueFrom: {configMapKeyRef: {name: c, key: a}}}
        - {name: B, valueFrom: {secretKeyRef: {name: c, key: a}}}`,
			[]Reference{
				{ID: SourceID{"configmap", "shop", "c"}, Keys: []string{"a"}},
				{ID: SourceID{"secret", "shop", "c"}, Keys: []string{"a"}},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: c
        env:`+tc.env)
			w := reduceWorkloadOf(t, cfg, u)
			if !reflect.DeepEqual(w.References, tc.want) {
				t.Errorf("references:\n got %+v\nwant %+v", w.References, tc.want)
			}
		})
	}
}

func TestReduceWorkloadKeyOrderDoesNotMatter(t *testing.T) {
	cfg := exampleConfig(t)
	mk := func(items string) *WorkloadState {
		return reduceWorkloadOf(t, cfg, fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec:
  template:
    spec:
      volumes:
      - name: v
        configMap: {name: c, items: `+items+`}
      containers: [{name: c, image: i}]
`))
	}
	a := mk("[{key: p, path: p}, {key: q, path: q}]")
	b := mk("[{key: q, path: q}, {key: p, path: p}, {key: p, path: p2}]")
	if !reflect.DeepEqual(a.References, b.References) {
		t.Fatalf("key order changed the references: %+v vs %+v", a.References, b.References)
	}
	if want := []string{"p", "q"}; !reflect.DeepEqual(a.References[0].Keys, want) {
		t.Fatalf("keys %v, want %v", a.References[0].Keys, want)
	}
	state := &SourceState{Digests: checksum.DigestsOf(map[string]checksum.Digest{"p": checksum.DigestValue("1"), "q": checksum.DigestValue("2")})}
	if state.Checksum(testSums, a.References[0].Keys) != state.Checksum(testSums, b.References[0].Keys) {
		t.Error("key order changed the checksum")
	}
}

func TestReduceWorkloadTemplateHash(t *testing.T) {
	cfg := exampleConfig(t)
	ts := cfg.Annotations.RestartTimestamp
	const withAnnotations = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec:
  template:
    metadata:
      labels: {app: w}
      annotations: {prometheus.io/scrape: "true"}
    spec:
      containers: [{name: app, image: "shop/w:1"}]
`
	const withLabelsOnly = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec:
  template:
    metadata:
      labels: {app: w}
    spec:
      containers: [{name: app, image: "shop/w:1"}]
`
	const withoutMetadata = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec:
  template:
    spec:
      containers: [{name: app, image: "shop/w:1"}]
`
	const emptyMaps = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec:
  template:
    metadata: {annotations: {}}
    spec:
      containers: [{name: app, image: "shop/w:1"}]
`
	const withEnv = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec:
  template:
    spec:
      containers: [{name: app, image: "shop/w:1", env: [{name: LEVEL, value: debug}]}]
`
	set := func(u *unstructured.Unstructured, value interface{}, path ...string) {
		if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
			t.Fatalf("fixture: setting %v: %v", path, err)
		}
	}
	setTimestamp := func(u *unstructured.Unstructured) {
		set(u, "2030-01-02T03:04:05.000000006Z", "spec", "template", "metadata", "annotations", ts)
	}
	cases := []struct {
		name   string
		before string
		change func(*unstructured.Unstructured)
		same   bool
	}{
		{"restart timestamp added to existing annotations", withAnnotations, setTimestamp, true},
		{"restart timestamp added, template had no annotations", withLabelsOnly, setTimestamp, true},
		{"restart timestamp added, template had no metadata", withoutMetadata, setTimestamp, true},
		{"restart timestamp added, template had empty annotations", emptyMaps, setTimestamp, true},
		{"restart timestamp changed", withAnnotations, func(u *unstructured.Unstructured) {
			setTimestamp(u)
		}, true},
		{"workload metadata changed", withAnnotations, func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"x": "y"})
			u.SetResourceVersion("99")
		}, true},
		{"replicas changed", withAnnotations, func(u *unstructured.Unstructured) {
			set(u, int64(5), "spec", "replicas")
		}, true},
		{"container image changed", withAnnotations, func(u *unstructured.Unstructured) {
			containers, found, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if err != nil || !found {
				t.Fatalf("fixture: no containers: %v", err)
			}
			containers[0].(map[string]interface{})["image"] = "shop/w:2"
			if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				t.Fatalf("fixture: %v", err)
			}
		}, false},
		{"other pod annotation changed", withAnnotations, func(u *unstructured.Unstructured) {
			set(u, "false", "spec", "template", "metadata", "annotations", "prometheus.io/scrape")
		}, false},
		{"pod label added", withoutMetadata, func(u *unstructured.Unstructured) {
			set(u, "w", "spec", "template", "metadata", "labels", "app")
		}, false},
		{"other pod annotation added next to the timestamp", withLabelsOnly, func(u *unstructured.Unstructured) {
			setTimestamp(u)
			set(u, "v", "spec", "template", "metadata", "annotations", "k")
		}, false},
		// The envVar strategy's variables are restart marks too.
		{"envVar variable added, the container had no env", withAnnotations, func(u *unstructured.Unstructured) {
			setEnv(t, u, env("STAKATER_APP_CONFIGMAP", "v3.k1:0123456789abcdef"))
		}, true},
		{"envVar variable of a deleted source (no value)", withAnnotations, func(u *unstructured.Unstructured) {
			setEnv(t, u, map[string]interface{}{"name": "STAKATER_APP_CONFIGMAP"})
		}, true},
		{"envVar variable added beside the container's own", withEnv, func(u *unstructured.Unstructured) {
			setEnv(t, u, env("LEVEL", "debug"), env("STAKATER_APP_CONFIGMAP", "v3.k1:0123456789abcdef"))
		}, true},
		{"a variable named so, with another value (Reloader's SHA-1)", withAnnotations, func(u *unstructured.Unstructured) {
			setEnv(t, u, env("STAKATER_APP_CONFIGMAP", "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"))
		}, false},
		{"a variable named so, read from a source", withAnnotations, func(u *unstructured.Unstructured) {
			setEnv(t, u, map[string]interface{}{"name": "STAKATER_APP_CONFIGMAP",
				"valueFrom": map[string]interface{}{"configMapKeyRef": map[string]interface{}{"name": "x", "key": "y"}}})
		}, false},
		{"an unkeyed digest (version 1) is no mark", withAnnotations, func(u *unstructured.Unstructured) {
			setEnv(t, u, env("STAKATER_APP_CONFIGMAP", "0123456789abcdef"))
		}, false},
		{"another variable holding a checksum", withAnnotations, func(u *unstructured.Unstructured) {
			setEnv(t, u, env("APP_CONFIGMAP", "v3.k1:0123456789abcdef"))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, tc.before)
			if tc.name == "restart timestamp changed" {
				if err := unstructured.SetNestedField(u.Object, "2029-01-01T00:00:00Z", "spec", "template", "metadata", "annotations", ts); err != nil {
					t.Fatal(err)
				}
			}
			before := reduceWorkloadOf(t, cfg, u).TemplateHash
			changed := u.DeepCopy()
			tc.change(changed)
			// A change that changed nothing would make a case of an equal
			// hash pass without testing anything.
			if reflect.DeepEqual(changed.Object, u.Object) {
				t.Fatal("fixture: the change left the workload as it was")
			}
			after := reduceWorkloadOf(t, cfg, changed).TemplateHash
			if before == "" || after == "" {
				t.Fatalf("empty template hash: %q %q", before, after)
			}
			if (before == after) != tc.same {
				t.Errorf("hash before %s after %s: same = %v, want %v", before, after, before == after, tc.same)
			}
		})
	}
}

func env(name, value string) map[string]interface{} {
	return map[string]interface{}{"name": name, "value": value}
}

// setEnv sets the env of the workload's first container.
func setEnv(t *testing.T, u *unstructured.Unstructured, vars ...map[string]interface{}) {
	t.Helper()
	containers, found, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil || !found {
		t.Fatalf("fixture: no containers: %v", err)
	}
	list := make([]interface{}, len(vars))
	for i, v := range vars {
		list[i] = v
	}
	containers[0].(map[string]interface{})["env"] = list
	if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatalf("fixture: %v", err)
	}
}

func TestReduceWorkloadMalformed(t *testing.T) {
	cfg := exampleConfig(t)
	cases := []struct {
		name        string
		yaml        string
		wantProblem string // substring; "" for none
	}{
		{"no spec", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop, annotations: {com.xing.deployment-restart: enabled}}
`, "no pod template at spec.template"},
		{"template is not an object", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec: {template: [1, 2]}
`, "no pod template at spec.template"},
		{"template without pod spec", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec: {template: {metadata: {labels: {a: b}}}}
`, "no pod spec at spec.template.spec"},
		{"no containers", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec: {template: {spec: {}}}
`, ""},
		{"containers of the wrong type", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec: {template: {spec: {containers: "oops", volumes: {a: 1}}}}
`, ""},
		{"null entries", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop}
spec: {template: {metadata: null, spec: {containers: [null, {name: a, env: null, envFrom: [null, {configMapRef: null}]}], volumes: [null]}}}
`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := reduceWorkloadOf(t, cfg, fromYAML(t, tc.yaml))
			if tc.wantProblem == "" {
				if w.Problem != "" {
					t.Errorf("problem %q, want none", w.Problem)
				}
				if w.TemplateHash == "" {
					t.Error("no template hash")
				}
			} else if !strings.Contains(w.Problem, tc.wantProblem) {
				t.Errorf("problem %q, want %q", w.Problem, tc.wantProblem)
			}
			if len(w.References) != 0 {
				t.Errorf("references %+v, want none", w.References)
			}
		})
	}
}

func TestReduceWorkloadAnnotations(t *testing.T) {
	cfg := exampleConfig(t)
	cases := []struct {
		name        string
		annotations string
		optedIn     bool
		hasApplied  bool
		applied     string
	}{
		{"no annotations", `{}`, false, false, ""},
		{"opted in", `{com.xing.deployment-restart: enabled}`, true, false, ""},
		{"opt-in value other than enabled", `{com.xing.deployment-restart: "true"}`, false, false, ""},
		{"opt-in value in other case", `{com.xing.deployment-restart: Enabled}`, false, false, ""},
		{"empty applied annotation is present", `{com.xing.deployment-restart.applied-config-checksums: ""}`, false, true, ""},
		{"applied annotation kept verbatim", `{com.xing.deployment-restart.applied-config-checksums: "not json"}`, false, true, "not json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := reduceWorkloadOf(t, cfg, fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop, annotations: `+tc.annotations+`}
spec: {template: {spec: {containers: [{name: a}]}}}
`))
			if w.OptedIn != tc.optedIn || w.HasApplied != tc.hasApplied || w.Applied != tc.applied {
				t.Errorf("optedIn %v hasApplied %v applied %q, want %v %v %q", w.OptedIn, w.HasApplied, w.Applied, tc.optedIn, tc.hasApplied, tc.applied)
			}
		})
	}
}

// The in-flight index (what the cap on rollouts in flight counts) holds
// paced restarts without a result: not those whose end goes unwritten
// (unpaced), nor those with a result.
func TestReduceWorkloadInFlight(t *testing.T) {
	cfg := exampleConfig(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		record   *record.LastRestart
		inFlight bool
	}{
		{"no record", nil, false},
		{"paced, rolling out", &record.LastRestart{At: at}, true},
		{"paced, complete", &record.LastRestart{At: at, Result: rollout.ResultComplete}, false},
		{"unpaced, rolling out", &record.LastRestart{At: at, Unpaced: true}, false},
		{"unpaced, failed", &record.LastRestart{At: at, Unpaced: true, Result: rollout.ResultFailed}, false},
		{"unpaced, running a Job", &record.LastRestart{At: at, Unpaced: true, Job: "nightly-1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: shop, annotations: {com.xing.deployment-restart: enabled}}
spec: {template: {spec: {containers: [{name: a}]}}}
`)
			if tc.record != nil {
				u.SetAnnotations(map[string]string{"com.xing.deployment-restart": "enabled", cfg.Annotations.Rollout: record.Encode(tc.record)})
			}
			if w := reduceWorkloadOf(t, cfg, u); w.InFlight != tc.inFlight {
				t.Fatalf("in flight %v, want %v", w.InFlight, tc.inFlight)
			}
		})
	}
}

func TestReduceWorkloadPassesThrough(t *testing.T) {
	cfg := exampleConfig(t)
	transform := ReduceWorkload(deploymentKind(t, cfg), cfg)
	reduced := reduceWorkloadOf(t, cfg, fromYAML(t, everyForm))
	for _, obj := range []interface{}{reduced, cache.DeletedFinalStateUnknown{Key: "shop/web", Obj: reduced}, nil} {
		out, err := transform(obj)
		if err != nil || !reflect.DeepEqual(out, obj) {
			t.Errorf("transform(%T) = %#v, %v; want it unchanged", obj, out, err)
		}
	}
}

func TestReduceWorkloadCronJobPath(t *testing.T) {
	cfg := exampleConfig(t)
	kind := config.WorkloadKind{PodTemplatePath: refs.MustParsePath("spec.jobTemplate.spec.template")}
	out, err := ReduceWorkload(kind, cfg)(fromYAML(t, `
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: ops}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: job
            envFrom: [{secretRef: {name: creds}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	w := out.(*WorkloadState)
	want := []Reference{{ID: SourceID{"secret", "ops", "creds"}}}
	if w.Problem != "" || !reflect.DeepEqual(w.References, want) {
		t.Errorf("problem %q references %+v, want %+v", w.Problem, w.References, want)
	}
}

func TestWorkloadStateDeepCopyAndSameDecisionInputs(t *testing.T) {
	cfg := exampleConfig(t)
	w := reduceWorkloadOf(t, cfg, fromYAML(t, everyForm))
	c := w.DeepCopyObject().(*WorkloadState)
	if !reflect.DeepEqual(w, c) {
		t.Fatalf("copy differs:\n%+v\n%+v", w, c)
	}
	if !w.SameDecisionInputs(c) {
		t.Error("copy has other decision inputs")
	}
	c.References[3].Keys[0] = "changed"
	if w.References[3].Keys[0] == "changed" {
		t.Error("copy shares reference keys with the original")
	}
	if w.SameDecisionInputs(c) {
		t.Error("changed keys not seen")
	}
	status := w.DeepCopyObject().(*WorkloadState)
	status.ResourceVersion = "43"
	if !w.SameDecisionInputs(status) {
		t.Error("resourceVersion change counted as a decision input")
	}
	ordered := w.DeepCopyObject().(*WorkloadState)
	ordered.TemplateRV = "41"
	if w.SameDecisionInputs(ordered) {
		t.Error("template resourceVersion not seen")
	}
	paused := w.DeepCopyObject().(*WorkloadState)
	paused.NotRolled = "spec.paused is true"
	if w.SameDecisionInputs(paused) {
		t.Error("a paused workload not seen")
	}
	var _ runtime.Object = w
}

// TestExampleConfigNamesTemplateHashAnnotation: reduceWorkload and BuildPatch
// read and write cfg.Annotations.AppliedTemplateHash. With an empty key every
// decision would be record-only (no restart ever) and every patch would write
// the annotation key "", which the API server rejects.
func TestExampleConfigNamesTemplateHashAnnotation(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Annotations.AppliedTemplateHash == "" {
		t.Errorf("config.Parse(examples/config.yaml).Annotations.AppliedTemplateHash is empty: restarts can never happen and patches are invalid")
	}
	if cfg.Annotations.AppliedTemplateHash != "com.xing.deployment-restart.applied-template-hash" {
		t.Errorf("AppliedTemplateHash = %q; the fixtures here use com.xing.deployment-restart.applied-template-hash", cfg.Annotations.AppliedTemplateHash)
	}
}

// TestDeepCopyEqualsOriginal: client-go's cache mutation detector
// (KUBE_CACHE_MUTATION_DETECTOR=true) compares cached objects with a
// DeepCopyObject taken when they were added, using reflect.DeepEqual; a copy
// that differs from an untouched original is reported as a mutation.
func TestDeepCopyEqualsOriginal(t *testing.T) {
	cfg := exampleConfig(t)
	objects := map[string]runtime.Object{
		"workload with references":      reduceWorkloadOf(t, cfg, fromYAML(t, everyForm)),
		"workload without references":   reduceWorkloadOf(t, cfg, fromYAML(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w, namespace: shop}\nspec: {template: {spec: {}}}")),
		"workload without pod template": reduceWorkloadOf(t, cfg, fromYAML(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w, namespace: shop}")),
		"workload built by hand":        &WorkloadState{},
		"config":                        reduce(t, baseConfigMap),
		"source without data":           reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: e, namespace: shop}"),
	}
	for name, obj := range objects {
		if c := obj.DeepCopyObject(); !reflect.DeepEqual(obj, c) {
			t.Errorf("%s: DeepCopyObject differs from the original:\n%#v\n%#v", name, obj, c)
		}
	}
}

// Workloads and sources of one namespace share one copy of its name, and of
// their type names, however many copies decoding made: thousands of objects
// would otherwise keep one each.
func TestReducedObjectsShareNamespaceAndTypeNames(t *testing.T) {
	// Interning shares a copy between collections (objmeta.Intern): a
	// collection between the reductions may free the canonical entry, and
	// the next reduction starts a new shared copy. That flaked under -race.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	cfg := exampleConfig(t)
	a, b := reduceWorkloadOf(t, cfg, fromYAML(t, everyForm)), reduceWorkloadOf(t, cfg, fromYAML(t, everyForm))
	cm := &unstructured.Unstructured{}
	if err := cm.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"shop"}}`)); err != nil {
		t.Fatal(err)
	}
	out, err := ReduceSource([]string{"data"})(cm)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*SourceState)
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("a source's namespace", a.Namespace, s.Namespace)
	same("a reference's namespace", a.Namespace, a.References[0].ID.Namespace)
	if a.Type != b.Type {
		t.Error("two workloads of a kind hold two copies of its type names")
	}
}
