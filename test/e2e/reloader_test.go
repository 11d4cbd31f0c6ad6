package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createTemplateAnnotatedDeployment creates a one-replica Deployment with
// the given workload annotations and pod-template annotations (what Helm
// charts' podAnnotations set).
func createTemplateAnnotatedDeployment(t *testing.T, ns, name string, annotations, podAnnotations map[string]string, fragment string) {
	t.Helper()
	replicas := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name), Annotations: podAnnotations},
				Spec:       podSpec(t, fragment),
			},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

// startReloaderOptInAll runs the controller with the Reloader preset and
// optInAll: true (Reloader's --auto-reload-all), watching only ns.
func startReloaderOptInAll(t *testing.T, ns string) {
	t.Helper()
	preset, err := os.ReadFile(filepath.Join(env.repoRoot, "examples", "presets", "reloader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "reloader-all.yaml")
	if err := os.WriteFile(file, append(preset, "\noptInAll: true\nnamespaces: ["+ns+"]\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := env.startController(ctxFor(t), "reloader-all-"+ns, file,
		"--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
}

// TestReloaderPodTemplateAndExclude runs the Reloader preset on Deployments
// annotated on their pod templates, and with an exclude list: the pod
// template's annotations count when the workload's metadata has none of
// them, the workload's own win when it has one, a restart (which writes
// into the pod template) keeps the opt-in, and a change of an excluded
// source restarts nothing. Restarts are counted as ReplicaSets.
func TestReloaderPodTemplateAndExclude(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startPreset(t, "reloader", ns)
	const (
		auto      = "reloader.stakater.com/auto"
		secReload = "secret.reloader.stakater.com/reload"
		cmExclude = "configmaps.exclude.reloader.stakater.com/reload"
	)
	createConfigMap(t, ns, "app", map[string]string{"k": "1"})
	createConfigMap(t, ns, "other", map[string]string{"k": "1"})
	createSecret(t, ns, "sec", map[string]string{"s": "1"})
	readsAppAndSec := `containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}, {secretRef: {name: sec}}]}]`

	// Opted in on the pod template only, with a ParseBool value.
	createTemplateAnnotatedDeployment(t, ns, "tmpl-auto", nil, map[string]string{auto: "T"}, readsAppAndSec)
	// The workload's own "false" wins over its pod template's "true".
	createTemplateAnnotatedDeployment(t, ns, "tmpl-off", map[string]string{auto: "false"}, map[string]string{auto: "true"}, readsAppAndSec)
	// A Secret list on the pod template, naming a Secret its pod spec does not.
	createTemplateAnnotatedDeployment(t, ns, "tmpl-reload", nil, map[string]string{secReload: "sec"},
		`containers: [{name: app, image: example/app:1}]`)
	// Opted in on the workload, excluding the ConfigMap app.
	createTemplateAnnotatedDeployment(t, ns, "excluded", map[string]string{auto: "true", cmExclude: "app"}, nil,
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}, {configMapRef: {name: other}}]}]`)

	cm := func(name string) string { return sourceID("configmap", ns, name) }
	secret := sourceID("secret", ns, "sec")
	waitRecorded(t, deploymentsGVR, ns, "tmpl-auto", cm("app"), secret)
	waitRecorded(t, deploymentsGVR, ns, "tmpl-reload", secret)
	before := waitRecorded(t, deploymentsGVR, ns, "excluded", cm("app"), cm("other"))
	witness := newPresetWitness(t, ns, map[string]string{auto: "true"})
	if raw := getWorkload(t, deploymentsGVR, ns, "tmpl-off").annotations[appliedKey]; raw != "" {
		t.Fatalf("workload with %s: false over a pod template's true was recorded: %s", auto, raw)
	}

	// app changes: its pod-template-opted reader restarts, the one that
	// excludes it does not, and records the change instead.
	setConfigMapKey(t, ns, "app", "k", "2")
	waitDeploymentRestarts(t, ns, "tmpl-auto", 1)
	witness.after(t)
	for name, n := range map[string]int{"tmpl-auto": 1, "tmpl-off": 0, "tmpl-reload": 0, "excluded": 0} {
		waitDeploymentRestarts(t, ns, name, n)
	}
	if after := waitRecorded(t, deploymentsGVR, ns, "excluded", cm("app")); after[cm("app")] == before[cm("app")] {
		t.Errorf("the excluded source's change was not recorded: %s still %s", cm("app"), after[cm("app")])
	}

	// After its restart (a timestamp in its pod template), tmpl-auto is
	// still opted in; the listed Secret restarts tmpl-reload; a source
	// not excluded restarts excluded.
	setSecretKey(t, ns, "sec", "s", "2")
	setConfigMapKey(t, ns, "other", "k", "2")
	witness.after(t)
	for name, n := range map[string]int{"tmpl-auto": 2, "tmpl-off": 0, "tmpl-reload": 1, "excluded": 1} {
		waitDeploymentRestarts(t, ns, name, n)
	}
	if raw := getWorkload(t, deploymentsGVR, ns, "tmpl-off").annotations[appliedKey]; raw != "" {
		t.Errorf("workload with %s: false over a pod template's true was recorded: %s", auto, raw)
	}
}

// TestReloaderOptInAll runs the Reloader preset with optInAll: every
// workload is opted in, unless its auto annotation (on the workload, or on
// its pod template when the workload has none) says "false", for every kind
// or for one.
func TestReloaderOptInAll(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startReloaderOptInAll(t, ns)
	const (
		auto   = "reloader.stakater.com/auto"
		cmAuto = "configmap.reloader.stakater.com/auto"
	)
	createConfigMap(t, ns, "app", map[string]string{"k": "1"})
	createSecret(t, ns, "sec", map[string]string{"s": "1"})
	readsAppAndSec := `containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}, {secretRef: {name: sec}}]}]`
	createTemplateAnnotatedDeployment(t, ns, "plain", nil, nil, readsAppAndSec)
	createTemplateAnnotatedDeployment(t, ns, "off", map[string]string{auto: "false"}, nil, readsAppAndSec)
	createTemplateAnnotatedDeployment(t, ns, "tmpl-off", nil, map[string]string{auto: "false"}, readsAppAndSec)
	createTemplateAnnotatedDeployment(t, ns, "cm-off", map[string]string{cmAuto: "false"}, nil, readsAppAndSec)

	cm, secret := sourceID("configmap", ns, "app"), sourceID("secret", ns, "sec")
	waitRecorded(t, deploymentsGVR, ns, "plain", cm, secret)
	waitRecorded(t, deploymentsGVR, ns, "cm-off", secret)
	witness := newPresetWitness(t, ns, nil)
	for _, name := range []string{"off", "tmpl-off"} {
		if raw := getWorkload(t, deploymentsGVR, ns, name).annotations[appliedKey]; raw != "" {
			t.Fatalf("opted-out workload %s was recorded: %s", name, raw)
		}
	}

	setConfigMapKey(t, ns, "app", "k", "2")
	waitDeploymentRestarts(t, ns, "plain", 1)
	witness.after(t)
	for name, n := range map[string]int{"plain": 1, "off": 0, "tmpl-off": 0, "cm-off": 0} {
		waitDeploymentRestarts(t, ns, name, n)
	}

	setSecretKey(t, ns, "sec", "s", "2")
	witness.after(t)
	for name, n := range map[string]int{"plain": 2, "off": 0, "tmpl-off": 0, "cm-off": 1} {
		waitDeploymentRestarts(t, ns, name, n)
	}
	// Every decision due is made by now (the witness restarted after the
	// changes): the opted-out workloads were never even recorded.
	for _, name := range []string{"off", "tmpl-off"} {
		if raw := getWorkload(t, deploymentsGVR, ns, name).annotations[appliedKey]; raw != "" {
			t.Errorf("opted-out workload %s was recorded: %s", name, raw)
		}
	}
}

// TestReloaderRegexReloadList runs the Reloader preset's reload list, whose
// entries are regular expressions matched against whole names: a change of
// a matching ConfigMap restarts the workload, one of a ConfigMap it does not
// match restarts nothing, a ConfigMap created later that matches restarts
// it (an optional source appeared) and is read from then on, and a bad
// entry is skipped with a Warning Event naming it.
func TestReloaderRegexReloadList(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startPreset(t, "reloader", ns)
	const reload = "configmap.reloader.stakater.com/reload"
	for _, name := range []string{"app-1", "app-2", "app-x", "other"} {
		createConfigMap(t, ns, name, map[string]string{"k": "1"})
	}
	createTemplateAnnotatedDeployment(t, ns, "lister", map[string]string{reload: "app-[0-9]+, bad["}, nil,
		`containers: [{name: app, image: example/app:1}]`)
	cm := func(name string) string { return sourceID("configmap", ns, name) }
	recorded := waitRecorded(t, deploymentsGVR, ns, "lister", cm("app-1"), cm("app-2"))
	if _, ok := recorded[cm("app-x")]; ok {
		t.Errorf("app-x recorded, which app-[0-9]+ does not match: %v", recorded)
	}
	if note := waitEvent(t, ns, "Deployment", "lister", "InvalidSourceList"); !strings.Contains(note, `"bad["`) || !strings.Contains(note, reload) {
		t.Errorf("InvalidSourceList note %q names neither the entry nor the annotation", note)
	}
	witness := newPresetWitness(t, ns, map[string]string{"reloader.stakater.com/auto": "true"})

	setConfigMapKey(t, ns, "other", "k", "2")
	setConfigMapKey(t, ns, "app-x", "k", "2")
	witness.after(t)
	waitDeploymentRestarts(t, ns, "lister", 0)

	setConfigMapKey(t, ns, "app-2", "k", "2")
	waitDeploymentRestarts(t, ns, "lister", 1)

	createConfigMap(t, ns, "app-3", map[string]string{"k": "1"})
	waitDeploymentRestarts(t, ns, "lister", 2)
	waitRecorded(t, deploymentsGVR, ns, "lister", cm("app-3"))
	setConfigMapKey(t, ns, "app-3", "k", "2")
	waitDeploymentRestarts(t, ns, "lister", 3)
}
