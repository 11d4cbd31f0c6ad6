package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
)

// Workloads recorded by the previous release (unkeyed version-1 checksums,
// template hash alone) are re-recorded in the keyed format when the new
// binary starts, with zero restarts; one change afterwards restarts each
// exactly once.
func TestUpgradeFromThePreviousReleaseRestartsNothing(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("upgrade")
	configFile := isolatedConfig(t, "upgrade", ns, keys, nil)
	raw, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, ns, "app", map[string]string{"k": "1", "other": "x"})
	cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctxFor(t), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reduced, err := reduceConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	v1Whole, _ := reduced.(*catalog.SourceState).ChecksumOf(1, nil)
	v1Key, _ := reduced.(*catalog.SourceState).ChecksumOf(1, []string{"k"})
	source := sourceID("configmap", ns, "app")

	// Two workloads as the previous release left them: one reads the whole
	// source, one a key.
	for name, tc := range map[string]struct {
		spec    string
		applied string
	}{
		"whole": {`volumes: [{name: v, configMap: {name: app}}]`, v1Whole},
		"key":   {`containers: [{name: app, image: example/app:1, env: [{name: K, valueFrom: {configMapKeyRef: {name: app, key: k}}}]}]`, v1Key},
	} {
		d := previousReleaseDeployment(t, cfg, name, podSpec(t, tc.spec), keys, map[string]string{source: tc.applied})
		if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	witness := newKeyedWitness(t, ns, "configmap", keys)

	p, err := env.startController(ctxFor(t), "upgrade", configFile, "--restart-grace-period", "500ms")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	witness.wait(t)
	for _, name := range []string{"whole", "key"} {
		s := waitKeyedApplied(t, ns, name, keys, map[string]string{source: currentChecksum(t, "configmap", ns, "app", keysOf(name))})
		if !strings.HasPrefix(s.applied[source], "v3.") {
			t.Fatalf("%s re-recorded as %q, not in the keyed format", name, s.applied[source])
		}
		if s.restartedAt != "" {
			t.Fatalf("%s was restarted by the upgrade", name)
		}
	}
	witness.after(t)
	waitKeyedRestarts(t, ns, "whole", keys, 0)
	waitKeyedRestarts(t, ns, "key", keys, 0)

	setConfigMapKey(t, ns, "app", "k", "2")
	waitKeyedRestarts(t, ns, "whole", keys, 1)
	waitKeyedRestarts(t, ns, "key", keys, 1)
	witness.after(t)
	waitKeyedRestarts(t, ns, "whole", keys, 1)
	waitKeyedRestarts(t, ns, "key", keys, 1)
}

// waitKeyedRestarts waits until the Deployment, handled by the controller
// using keys, has been restarted n times: n pod-template changes beyond its
// first (its ReplicaSets), the last one the controller's.
func waitKeyedRestarts(t *testing.T, ns, name string, keys isolatedKeys, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("deployment %s/%s restarted %d time(s)", ns, name, n), func() (bool, error) {
		rss := replicaSetsOf(t, ns, name)
		if rss > n+1 {
			t.Fatalf("deployment %s/%s has %d ReplicaSets: restarted more than %d time(s)", ns, name, rss, n)
		}
		s, err := readKeyed(t, ns, name, keys)
		if err != nil {
			return false, err
		}
		return rss == n+1 && (s.restartedAt != "") == (n > 0), nil
	})
}

func keysOf(name string) []string {
	if name == "key" {
		return []string{"k"}
	}
	return nil
}

// previousReleaseDeployment is an opted-in Deployment carrying the
// annotations the previous release wrote: version-1 checksums and the
// template hash alone (no resourceVersion, no UID).
func previousReleaseDeployment(t *testing.T, cfg *config.Config, name string, spec corev1.PodSpec, keys isolatedKeys, applied map[string]string) *appsv1.Deployment {
	t.Helper()
	zero := int32(0)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	reduced, err := catalog.ReduceWorkload(cfg.Workloads[0], cfg)(&unstructured.Unstructured{Object: content})
	if err != nil {
		t.Fatal(err)
	}
	hash := reduced.(*catalog.WorkloadState).TemplateHash
	if hash == "" || strings.Contains(hash, "@") {
		t.Fatalf("template hash %q", hash)
	}
	encoded, err := json.Marshal(applied)
	if err != nil {
		t.Fatal(err)
	}
	d.Annotations[keys.applied] = string(encoded)
	d.Annotations[keys.templateHash] = hash
	return d
}
