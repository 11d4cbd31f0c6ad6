package e2e

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// eventsFor returns "Reason: note" of every Event about the named object.
func eventsFor(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := env.kube.CoreV1().Events(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// waitEventNote waits for an Event about the object whose reason and note start
// as given.
func waitEventNote(t *testing.T, ns, name, reason, notePrefix string) {
	t.Helper()
	want := reason + ": " + notePrefix
	waitFor(t, fmt.Sprintf("Event %q on %s/%s", want, ns, name), func() (bool, error) {
		for _, e := range eventsFor(t, ns, name) {
			if strings.HasPrefix(e, want) {
				return true, nil
			}
		}
		return false, fmt.Errorf("events: %q", eventsFor(t, ns, name))
	})
}

// The Events `kubectl describe` shows: recorded on first sight, and restarted
// naming the source and the keys read, never a value.
func TestEventsSayWhy(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "app", map[string]string{"level": "info", "other": "x"})
	createDeployment(t, ns, "web", podSpec(t, `
containers: [{name: app, image: example/app:1, env: [{name: LEVEL, valueFrom: {configMapKeyRef: {name: app, key: level}}}]}]`),
		workloadOptions{optIn: true})
	waitEventNote(t, ns, "web", "RecordedChecksums", "Recorded the checksums of the data its pods read from 1 source(s)")

	setConfigMapKey(t, ns, "app", "level", "debug-secret-value")
	waitDeploymentRestarts(t, ns, "web", 1)
	waitEventNote(t, ns, "web", "Restarted", "Restarted to pick up changed data: configmap/"+ns+"/app (changed keys: level)")
	for _, e := range eventsFor(t, ns, "web") {
		if strings.Contains(e, "debug-secret-value") {
			t.Fatalf("an Event shows source data: %q", e)
		}
	}
}

// A dry run decides and reports as usual and patches nothing.
func TestDryRunPatchesNothing(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("dryrun")
	p, err := env.startController(ctxFor(t), "dryrun", isolatedConfig(t, "dryrun", ns, keys, nil),
		"--dry-run", "--restart-grace-period", "500ms")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	createConfigMap(t, ns, "app", map[string]string{"k": "1"})
	zero := int32(0)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labelsFor("web"), Annotations: map[string]string{keys.optIn: "enabled"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("web")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("web")},
				Spec: podSpec(t, `volumes: [{name: v, configMap: {name: app}}]`)},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEventNote(t, ns, "web", "WouldRecordChecksums", "Would record the checksums")
	setConfigMapKey(t, ns, "app", "k", "2")
	waitEventNote(t, ns, "web", "WouldRestart", "Would restart to pick up changed data: configmap/"+ns+"/app (changed keys: k)")

	got, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[keys.applied]; ok {
		t.Fatalf("a dry run wrote the checksums annotation: %v", got.Annotations)
	}
	if _, ok := got.Spec.Template.Annotations[keys.timestamp]; ok {
		t.Fatalf("a dry run restarted the workload: %v", got.Spec.Template.Annotations)
	}
	if v, err := p.Metric("restart_controller_dry_run"); err != nil || v != 1 {
		t.Fatalf("restart_controller_dry_run = %v, %v; want 1", v, err)
	}
	if v, err := p.Metric("deployment_restart_controller_deployment_restarts_total"); err != nil || v != 1 {
		t.Fatalf("restarts counted %v, %v; want 1 (counted as usual)", v, err)
	}
	if !strings.Contains(p.LogTail(50), "would restart") {
		t.Fatalf("the log does not say what it would have done:\n%s", p.LogTail(50))
	}
}
