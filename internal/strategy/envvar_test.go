package strategy

import (
	"os"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
)

// exampleConfig compiles examples/config.yaml: its references are the ones
// the containers are matched with.
func exampleConfig(t *testing.T) *config.Config {
	t.Helper()
	data, err := os.ReadFile("../../examples/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func podSpecOf(t *testing.T, s string) map[string]interface{} {
	t.Helper()
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReaders: which containers get a source's variable. Every container
// that reads it, by a volume it mounts or by its own env or envFrom; the
// first container when only init containers read it, or none does.
func TestReaders(t *testing.T) {
	cfg := exampleConfig(t)
	cm := func(name string) catalog.SourceID {
		return catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: name}
	}
	secret := func(name string) catalog.SourceID {
		return catalog.SourceID{Kind: "secret", Namespace: "shop", Name: name}
	}
	const spec = `
volumes:
- {name: conf, configMap: {name: app}}
- {name: both, projected: {sources: [{configMap: {name: shared}}, {secret: {name: tls}}]}}
- {name: certs, secret: {secretName: tls}}
- {name: unmounted, configMap: {name: orphan}}
initContainers:
- {name: migrate, image: x, envFrom: [{secretRef: {name: db}}]}
- {name: warm, image: x, volumeMounts: [{name: conf, mountPath: /c}]}
containers:
- {name: web, image: x, volumeMounts: [{name: conf, mountPath: /c}, {name: both, mountPath: /b}]}
- {name: sidecar, image: x, env: [{name: T, valueFrom: {secretKeyRef: {name: tls, key: crt}}}], envFrom: [{configMapRef: {name: shared}}]}
- {name: proxy, image: x, volumeMounts: [{name: certs, mountPath: /certs}]}
- {name: logs, image: x}
`
	for _, tc := range []struct {
		name string
		id   catalog.SourceID
		want []int
	}{
		{"a volume mounted by one container (and an init container)", cm("app"), []int{0}},
		{"a projected volume in one, envFrom in another", cm("shared"), []int{0, 1}},
		{"a projected volume, a secretKeyRef and a secret volume", secret("tls"), []int{0, 1, 2}},
		{"read by an init container only: the first container", secret("db"), []int{0}},
		{"a volume no container mounts: the first container", cm("orphan"), []int{0}},
		{"a listed source the pod spec does not name: the first container", cm("listed"), []int{0}},
		{"a kind no reference names", catalog.SourceID{Kind: "other", Namespace: "shop", Name: "app"}, []int{0}},
		{"another namespace's source of the same name", catalog.SourceID{Kind: "configmap", Namespace: "base", Name: "app"}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Readers(cfg.Extractors, podSpecOf(t, spec), "shop", tc.id); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("containers %v, want %v", got, tc.want)
			}
		})
	}
	if got := Readers(cfg.Extractors, podSpecOf(t, `{volumes: [{name: conf, configMap: {name: app}}]}`), "shop", cm("app")); got != nil {
		t.Errorf("no containers: %v", got)
	}
}

// TestEnvVars: one variable per source and container that reads it, named
// as Reloader names it, holding the recorded (keyed) checksum; a deleted
// source's is empty.
func TestEnvVars(t *testing.T) {
	cfg := exampleConfig(t)
	spec := podSpecOf(t, `
containers:
- {name: web, image: x, envFrom: [{configMapRef: {name: app-config}}, {secretRef: {name: db}}]}
- {name: worker, image: x, env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]}
`)
	app := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app-config"}
	db := catalog.SourceID{Kind: "secret", Namespace: "shop", Name: "db"}
	gone := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "feature.flags"}
	applied := map[string]string{app.String(): "v3.k1:0123456789abcdef", db.String(): "v3.k1:fedcba9876543210", gone.String(): ""}
	got := EnvVars(cfg.Sources, cfg.Extractors, spec, "shop", []catalog.SourceID{app, db, gone}, applied)
	want := []EnvVar{
		{0, "STAKATER_APP_CONFIG_CONFIGMAP", "v3.k1:0123456789abcdef"},
		{0, "STAKATER_DB_SECRET", "v3.k1:fedcba9876543210"},
		{1, "STAKATER_DB_SECRET", "v3.k1:fedcba9876543210"},
		{0, "STAKATER_FEATURE_FLAGS_CONFIGMAP", ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("variables\n got %v\nwant %v", got, want)
	}
}

// setEnvVars appends a variable, updates one of that name, replaces one
// read from elsewhere, and reports no change where every value is there.
func TestSetEnvVars(t *testing.T) {
	containers := podSpecOf(t, `
containers:
- {name: web, env: [{name: A, value: "1"}, {name: STAKATER_APP_CONFIGMAP, value: old}]}
- {name: worker}
- {name: odd, env: [{name: STAKATER_APP_CONFIGMAP, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]}
`)["containers"].([]interface{})
	vars := []EnvVar{{0, "STAKATER_APP_CONFIGMAP", "new"}, {1, "STAKATER_APP_CONFIGMAP", "new"}, {2, "STAKATER_APP_CONFIGMAP", "new"}}
	got, changed := setEnvVars(containers, vars)
	want := podSpecOf(t, `
containers:
- {name: web, env: [{name: A, value: "1"}, {name: STAKATER_APP_CONFIGMAP, value: new}]}
- {name: worker, env: [{name: STAKATER_APP_CONFIGMAP, value: new}]}
- {name: odd, env: [{name: STAKATER_APP_CONFIGMAP, value: new}]}
`)["containers"]
	if !changed || !reflect.DeepEqual(got, want) {
		t.Errorf("changed %v, containers\n got %v\nwant %v", changed, got, want)
	}
	if containers[0].(map[string]interface{})["env"].([]interface{})[1].(map[string]interface{})["value"] != "old" {
		t.Error("the object read was edited")
	}
	if _, changed := setEnvVars(got, vars); changed {
		t.Error("setting the same values again is a change")
	}
	// An empty value is one the API server dropped.
	dropped := podSpecOf(t, `{containers: [{name: web, env: [{name: STAKATER_GONE_CONFIGMAP}]}]}`)["containers"].([]interface{})
	if _, changed := setEnvVars(dropped, []EnvVar{{0, "STAKATER_GONE_CONFIGMAP", ""}}); changed {
		t.Error("an empty value set again is a change")
	}
}
