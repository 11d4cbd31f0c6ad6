package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each peer's preset (examples/presets) runs as its own controller on its
// own namespaces, with workloads annotated the peer's way, and their
// restarts are counted. xing's preset is the built-in default; the suite's
// controller runs it for every other test (main_test.go).

// startPreset runs the controller with examples/presets/NAME.yaml, watching
// only the given namespaces.
func startPreset(t *testing.T, name string, namespaces ...string) {
	t.Helper()
	preset, err := os.ReadFile(filepath.Join(env.repoRoot, "examples", "presets", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), name+".yaml")
	config := string(preset) + "\nnamespaces: [" + strings.Join(namespaces, ", ") + "]\n"
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := env.startController(ctxFor(t), "preset-"+name+"-"+namespaces[0], file,
		"--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
}

// createAnnotatedDeployment creates a one-replica Deployment with the given
// workload annotations.
func createAnnotatedDeployment(t *testing.T, ns, name string, annotations map[string]string, fragment string) {
	t.Helper()
	replicas := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: podSpec(t, fragment)},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

func annotateConfigMap(t *testing.T, ns, name string, annotations map[string]string) {
	t.Helper()
	updateConfigMap(t, ns, name, func(cm *corev1.ConfigMap) {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		for k, v := range annotations {
			cm.Annotations[k] = v
		}
	})
}

// presetWitness is a Deployment the preset's controller alone manages,
// reading ConfigMap "witness": its restart for a change made after others
// orders every decision due for those (see orderingWitness).
type presetWitness struct {
	ns       string
	restarts int
}

func newPresetWitness(t *testing.T, ns string, annotations map[string]string) *presetWitness {
	t.Helper()
	createConfigMap(t, ns, "witness", map[string]string{"n": "0"})
	createAnnotatedDeployment(t, ns, "witness", annotations, `volumes: [{name: v, configMap: {name: witness}}]`)
	waitRecorded(t, deploymentsGVR, ns, "witness", sourceID("configmap", ns, "witness"))
	return &presetWitness{ns: ns}
}

func (w *presetWitness) after(t *testing.T) {
	t.Helper()
	w.restarts++
	setConfigMapKey(t, w.ns, "witness", "n", fmt.Sprint(w.restarts))
	waitDeploymentRestarts(t, w.ns, "witness", w.restarts)
}

// Reloader's annotations under examples/presets/reloader.yaml. Where
// Reloader restarts on any change of an object, the pod spec's references
// count key by key here.
func TestPresetReloader(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startPreset(t, "reloader", ns)
	const (
		auto   = "reloader.stakater.com/auto"
		cmAuto = "configmap.reloader.stakater.com/auto"
		search = "reloader.stakater.com/search"
		match  = "reloader.stakater.com/match"
		reload = "configmap.reloader.stakater.com/reload"
		ignore = "reloader.stakater.com/ignore"
	)
	createConfigMap(t, ns, "app", map[string]string{"k1": "1", "k2": "1"})
	createConfigMap(t, ns, "cms", map[string]string{"x": "1"})
	createSecret(t, ns, "sec", map[string]string{"s": "1"})
	createConfigMap(t, ns, "match", map[string]string{"m": "1"})
	annotateConfigMap(t, ns, "match", map[string]string{match: "true"})
	createConfigMap(t, ns, "nomatch", map[string]string{"m": "1"})
	createConfigMap(t, ns, "listed", map[string]string{"l": "1"})
	createConfigMap(t, ns, "ignored", map[string]string{"i": "1"})
	annotateConfigMap(t, ns, "ignored", map[string]string{ignore: "true"})

	readsK1 := `containers: [{name: app, image: example/app:1, env: [{name: K1, valueFrom: {configMapKeyRef: {name: app, key: k1}}}]}]
volumes: [{name: v, configMap: {name: ignored}}]`
	createAnnotatedDeployment(t, ns, "auto", map[string]string{auto: "true"}, readsK1)
	createAnnotatedDeployment(t, ns, "cm-auto", map[string]string{cmAuto: "true"},
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: cms}}, {secretRef: {name: sec}}]}]`)
	createAnnotatedDeployment(t, ns, "search", map[string]string{search: "true"},
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: match}}, {configMapRef: {name: nomatch}}]}]`)
	// Listed, and opted in for what it lists only: its pod spec's app does
	// not count.
	createAnnotatedDeployment(t, ns, "reload", map[string]string{reload: "listed"},
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}]}]`)
	createAnnotatedDeployment(t, ns, "off", map[string]string{auto: "false"},
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}]}]`)
	cm := func(name string) string { return sourceID("configmap", ns, name) }
	waitRecorded(t, deploymentsGVR, ns, "auto", cm("app"), cm("ignored"))
	waitRecorded(t, deploymentsGVR, ns, "cm-auto", cm("cms"))
	waitRecorded(t, deploymentsGVR, ns, "search", cm("match"), cm("nomatch"))
	waitRecorded(t, deploymentsGVR, ns, "reload", cm("listed"))
	witness := newPresetWitness(t, ns, map[string]string{auto: "true"})
	if raw := getWorkload(t, deploymentsGVR, ns, "off").annotations[appliedKey]; raw != "" {
		t.Fatalf("workload with %s: false was recorded: %s", auto, raw)
	}

	// Changes that restart nothing here: a key auto does not read, a
	// Secret the ConfigMap-only auto does not cover, a source without the
	// match annotation, an ignored source.
	setConfigMapKey(t, ns, "app", "k2", "2")
	setSecretKey(t, ns, "sec", "s", "2")
	setConfigMapKey(t, ns, "nomatch", "m", "2")
	setConfigMapKey(t, ns, "ignored", "i", "2")
	witness.after(t)
	for _, name := range []string{"auto", "cm-auto", "search", "reload", "off"} {
		waitDeploymentRestarts(t, ns, name, 0)
	}

	// Changes that restart, each its reader once.
	setConfigMapKey(t, ns, "app", "k1", "2")
	setConfigMapKey(t, ns, "cms", "x", "2")
	setConfigMapKey(t, ns, "match", "m", "2")
	setConfigMapKey(t, ns, "listed", "l", "2")
	for _, name := range []string{"auto", "cm-auto", "search", "reload"} {
		waitDeploymentRestarts(t, ns, name, 1)
	}
	witness.after(t)
	for name, n := range map[string]int{"auto": 1, "cm-auto": 1, "search": 1, "reload": 1, "off": 0} {
		waitDeploymentRestarts(t, ns, name, n)
	}
}

// wave's annotations under examples/presets/wave.yaml, including an extra
// ConfigMap in another namespace.
func TestPresetWave(t *testing.T) {
	t.Parallel()
	ns, other := newNamespace(t), newNamespace(t)
	startPreset(t, "wave", ns, other)
	const (
		update       = "wave.pusher.com/update-on-config-change"
		extraCMs     = "wave.pusher.com/extra-configmaps"
		extraSecrets = "wave.pusher.com/extra-secrets"
	)
	createConfigMap(t, ns, "app", map[string]string{"k1": "1", "k2": "1"})
	createConfigMap(t, ns, "extra", map[string]string{"e": "1"})
	createSecret(t, ns, "extra-sec", map[string]string{"e": "1"})
	createConfigMap(t, other, "shared", map[string]string{"e": "1"})

	createAnnotatedDeployment(t, ns, "wave", map[string]string{
		update: "true", extraCMs: "extra, " + other + "/shared", extraSecrets: "extra-sec",
	}, `containers: [{name: app, image: example/app:1, env: [{name: K1, valueFrom: {configMapKeyRef: {name: app, key: k1}}}]}]`)
	// Without update-on-config-change, wave ignores the extra lists.
	createAnnotatedDeployment(t, ns, "extra-only", map[string]string{extraCMs: "extra"},
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}]}]`)
	waitRecorded(t, deploymentsGVR, ns, "wave", sourceID("configmap", ns, "app"), sourceID("configmap", ns, "extra"),
		sourceID("configmap", other, "shared"), sourceID("secret", ns, "extra-sec"))
	witness := newPresetWitness(t, ns, map[string]string{update: "true"})

	setConfigMapKey(t, ns, "app", "k2", "2") // a key it does not read
	witness.after(t)
	waitDeploymentRestarts(t, ns, "wave", 0)

	restarts := 0
	for _, change := range []func(){
		func() { setConfigMapKey(t, ns, "extra", "e", "2") },
		func() { setConfigMapKey(t, other, "shared", "e", "2") },
		func() { setSecretKey(t, ns, "extra-sec", "e", "2") },
		func() { setConfigMapKey(t, ns, "app", "k1", "2") },
	} {
		change()
		restarts++
		waitDeploymentRestarts(t, ns, "wave", restarts)
	}
	witness.after(t)
	waitDeploymentRestarts(t, ns, "wave", 4)
	waitDeploymentRestarts(t, ns, "extra-only", 0)
	if raw := getWorkload(t, deploymentsGVR, ns, "extra-only").annotations[appliedKey]; raw != "" {
		t.Fatalf("workload with only %s was recorded: %s", extraCMs, raw)
	}
}
