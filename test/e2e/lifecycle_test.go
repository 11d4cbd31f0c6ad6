package e2e

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startReloaderWith runs the controller with the Reloader preset plus extra
// YAML, watching only ns. The suite's controller reads none of the
// preset's annotations, so it leaves the workloads opted in by them alone.
func startReloaderWith(t *testing.T, ns, extra string) {
	t.Helper()
	preset, err := os.ReadFile(filepath.Join(env.repoRoot, "examples", "presets", "reloader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, append(preset, "\n"+extra+"\nnamespaces: ["+ns+"]\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := env.startController(ctxFor(t), "lifecycle-"+ns, file,
		"--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
}

// TestSourceDeletion deletes the sources workloads read. With the default
// sourceLifecycle, the deletion of a source a workload reads optionally
// restarts it once (its pods start without it, as they would have had it
// been absent all along) and records it absent; the deletion of a required
// one restarts nothing (new pods could not start) and a Warning Event says
// so. With restartOnDelete off, no deletion restarts anything. Restarts are
// counted as ReplicaSets.
func TestSourceDeletion(t *testing.T) {
	t.Parallel()
	on, off := newNamespace(t), newNamespace(t)
	startReloaderWith(t, on, "")
	startReloaderWith(t, off, "sourceLifecycle: {restartOnDelete: false}")
	optIn := map[string]string{"reloader.stakater.com/auto": "true"}
	witnesses := map[string]*presetWitness{}
	for _, ns := range []string{on, off} {
		createConfigMap(t, ns, "opt", map[string]string{"k": "1"})
		createConfigMap(t, ns, "req", map[string]string{"k": "1"})
		createAnnotatedDeployment(t, ns, "reads-opt", optIn,
			`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: opt, optional: true}}]}]`)
		createAnnotatedDeployment(t, ns, "reads-req", optIn,
			`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: req}}]}]`)
		waitRecorded(t, deploymentsGVR, ns, "reads-opt", sourceID("configmap", ns, "opt"))
		waitRecorded(t, deploymentsGVR, ns, "reads-req", sourceID("configmap", ns, "req"))
		witnesses[ns] = newPresetWitness(t, ns, optIn)
	}
	for _, ns := range []string{on, off} {
		for _, name := range []string{"opt", "req"} {
			if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	waitDeploymentRestarts(t, on, "reads-opt", 1)
	if got := waitRecorded(t, deploymentsGVR, on, "reads-opt")[sourceID("configmap", on, "opt")]; got != "" {
		t.Errorf("deleted optional source recorded as %q, want absent (\"\")", got)
	}
	for _, ns := range []string{on, off} {
		waitEvent(t, ns, "Deployment", "reads-req", "RequiredSourceDeleted")
		witnesses[ns].after(t)
	}
	for ns, restarts := range map[string]map[string]int{
		on:  {"reads-opt": 1, "reads-req": 0},
		off: {"reads-opt": 0, "reads-req": 0},
	} {
		for name, n := range restarts {
			waitDeploymentRestarts(t, ns, name, n)
		}
	}
}
