package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The selector tests each run a controller of their own whose opt-in
// annotation (selectorsOptIn + the test's) no other test uses, so that one
// watching every namespace acts on its test's workloads alone (the suite's
// controller leaves them alone too).
const (
	selectorsOptIn = "selectors.e2e.example/"
	selectedLabel  = "selectors.e2e.example/selected"
	reloadLabel    = "selectors.e2e.example/reload"
)

// startSelectorsController runs the controller with the built-in config,
// selectorsOptIn+optIn as its opt-in, and extra YAML.
func startSelectorsController(t *testing.T, optIn, name, extra string) *controllerProcess {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	config := "annotations: {optIn: " + selectorsOptIn + optIn + "}\n" + extra + "\n"
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := env.startController(ctxFor(t), name, file, "--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// readerOf creates a Deployment, opted in with selectorsOptIn+optIn, that
// reads the ConfigMap.
func readerOf(t *testing.T, optIn, ns, name, configMap string) {
	t.Helper()
	createAnnotatedDeployment(t, ns, name, map[string]string{selectorsOptIn + optIn: "enabled"},
		fmt.Sprintf(`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: %s}}]}]`, configMap))
}

func labelNamespace(t *testing.T, ns, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, selectedLabel, v)
	if _, err := env.kube.CoreV1().Namespaces().Patch(ctxFor(t), ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling namespace %s: %v", ns, err)
	}
}

// assertUnrecorded: the controller wrote nothing on the workload.
func assertUnrecorded(t *testing.T, ns, name string) {
	t.Helper()
	d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := d.Annotations[appliedKey]; ok {
		t.Fatalf("deployment %s/%s has checksums recorded (%s), want none: its namespace is not acted on", ns, name, v)
	}
}

// TestIgnoredNamespaces: a controller watching every namespace but one
// (ignoredNamespaces) restarts a workload in another namespace when its
// ConfigMap changes, and neither records nor restarts the same workload in
// the ignored one.
func TestIgnoredNamespaces(t *testing.T) {
	t.Parallel()
	ignored, watched := newNamespace(t), newNamespace(t)
	for _, ns := range []string{ignored, watched} {
		createConfigMap(t, ns, "config", map[string]string{"k": "1"})
		readerOf(t, "ignored", ns, "app", "config")
	}
	startSelectorsController(t, "ignored", "ignored-"+watched, "ignoredNamespaces: ["+ignored+"]")
	waitRecorded(t, deploymentsGVR, watched, "app", sourceID("configmap", watched, "config"))
	before := getWorkload(t, deploymentsGVR, ignored, "app")
	for _, ns := range []string{ignored, watched} {
		setConfigMapKey(t, ns, "config", "k", "2")
	}
	waitDeploymentRestarts(t, watched, "app", 1) // the witness
	assertNotRestarted(t, deploymentsGVR, ignored, "app", before)
	assertUnrecorded(t, ignored, "app")
}

// TestNamespaceSelector: only workloads of namespaces whose labels match
// namespaceSelector are acted on, and a namespace relabelled while the
// controller runs starts or stops being acted on. A change made while a
// namespace was not selected restarts its workloads once it is selected
// again: the checksums recorded before are compared, not forgotten.
func TestNamespaceSelector(t *testing.T) {
	t.Parallel()
	a, b := newNamespace(t), newNamespace(t)
	labelNamespace(t, a, a)
	for _, ns := range []string{a, b} {
		createConfigMap(t, ns, "config", map[string]string{"k": "1"})
		readerOf(t, "nssel", ns, "app", "config")
	}
	// Selects both values, so that relabelling moves namespaces in and out
	// while other tests' namespaces stay out.
	startSelectorsController(t, "nssel", "nssel-"+a, fmt.Sprintf("namespaceSelector: %q", selectedLabel+" in ("+a+","+b+")"))
	waitRecorded(t, deploymentsGVR, a, "app", sourceID("configmap", a, "config"))
	before := getWorkload(t, deploymentsGVR, b, "app")
	for _, ns := range []string{a, b} {
		setConfigMapKey(t, ns, "config", "k", "2")
	}
	waitDeploymentRestarts(t, a, "app", 1)
	assertNotRestarted(t, deploymentsGVR, b, "app", before)
	assertUnrecorded(t, b, "app")

	// b selected, a no longer: b's first sight records (no restart).
	labelNamespace(t, b, b)
	labelNamespace(t, a, "")
	waitRecorded(t, deploymentsGVR, b, "app", sourceID("configmap", b, "config"))
	waitDeploymentRestarts(t, b, "app", 0)
	before = getWorkload(t, deploymentsGVR, a, "app")
	for _, ns := range []string{a, b} {
		setConfigMapKey(t, ns, "config", "k", "3")
	}
	waitDeploymentRestarts(t, b, "app", 1)
	assertNotRestarted(t, deploymentsGVR, a, "app", before)

	// a selected again: the change made in between restarts it.
	labelNamespace(t, a, a)
	waitDeploymentRestarts(t, a, "app", 2)
	waitDeploymentRestarts(t, b, "app", 1)
}

// TestSourceSelector: with a sourceSelector, a change of a ConfigMap
// without the label restarts nothing while one of a labelled ConfigMap
// restarts its reader; the unlabelled one is not in the controller's
// caches (configs_total counts the labelled ones alone) and is not recorded
// (neither absent nor present). Labelled later, it appears without a
// restart, and its next change restarts.
func TestSourceSelector(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createConfigMap(t, ns, "unlabelled", map[string]string{"k": "1"})
	createConfigMap(t, ns, "labelled", map[string]string{"k": "1"})
	updateConfigMap(t, ns, "labelled", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{reloadLabel: "true"} })
	readerOf(t, "srcsel", ns, "reads-unlabelled", "unlabelled")
	readerOf(t, "srcsel", ns, "reads-labelled", "labelled")
	p := startSelectorsController(t, "srcsel", "srcsel-"+ns, "namespaces: ["+ns+"]\nsourceSelector: "+reloadLabel+"=true")

	waitRecorded(t, deploymentsGVR, ns, "reads-labelled", sourceID("configmap", ns, "labelled"))
	unlabelled := sourceID("configmap", ns, "unlabelled")
	if applied := waitRecorded(t, deploymentsGVR, ns, "reads-unlabelled"); applied != nil {
		if v, ok := applied[unlabelled]; ok {
			t.Fatalf("unselected source recorded as %q; want no entry", v)
		}
	}
	if n, err := p.Metric("deployment_restart_controller_configs_total"); err != nil || n != 1 {
		t.Fatalf("the controller caches %v sources (%v); want 1, the labelled ConfigMap alone", n, err)
	}
	before := getWorkload(t, deploymentsGVR, ns, "reads-unlabelled")
	setConfigMapKey(t, ns, "unlabelled", "k", "2")
	setConfigMapKey(t, ns, "labelled", "k", "2")
	waitDeploymentRestarts(t, ns, "reads-labelled", 1)
	assertNotRestarted(t, deploymentsGVR, ns, "reads-unlabelled", before)

	// Labelled: it enters the caches and is recorded, not restarted for.
	updateConfigMap(t, ns, "unlabelled", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{reloadLabel: "true"} })
	waitRecorded(t, deploymentsGVR, ns, "reads-unlabelled", unlabelled)
	setConfigMapKey(t, ns, "labelled", "k", "3")
	waitDeploymentRestarts(t, ns, "reads-labelled", 2)
	assertNotRestarted(t, deploymentsGVR, ns, "reads-unlabelled", before)
	setConfigMapKey(t, ns, "unlabelled", "k", "3")
	waitDeploymentRestarts(t, ns, "reads-unlabelled", 1)
}
