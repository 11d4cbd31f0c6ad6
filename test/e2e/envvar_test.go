package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startEnvVarController runs a controller of its own keys, watching only
// ns, that restarts Deployments by the envVar strategy (Reloader's
// env-vars); the suite's controller, of other keys, leaves ns alone.
func startEnvVarController(t *testing.T, ns string, keys isolatedKeys) {
	t.Helper()
	file := isolatedConfig(t, "envvar-"+ns, ns, keys, func(cfg map[string]interface{}) {
		for _, w := range cfg["workloads"].([]interface{}) {
			if k := w.(map[string]interface{}); k["resource"] == "deployments" {
				k["restart"] = map[string]interface{}{"strategy": "envVar"}
			}
		}
	})
	p, err := env.startController(ctxFor(t), "envvar-"+ns, file, "--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	logTailOnFailure(t, "envvar", &p)
	t.Cleanup(p.Stop)
}

// TestEnvVarStrategy: with the envVar strategy a ConfigMap's change restarts
// a Deployment once (one new ReplicaSet) by setting Reloader's variable,
// STAKATER_<NAME>_CONFIGMAP, to the keyed checksum the controller records
// for the ConfigMap, in the container that reads it and in no other; the
// new pods run it. A change of a ConfigMap only the other container reads
// sets that container's variable alone, and an update that changes no data
// restarts nothing.
func TestEnvVarStrategy(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	keys := keysFor("envvar")
	startEnvVarController(t, ns, keys)
	createConfigMap(t, ns, "app-config", map[string]string{"k": "0"})
	createConfigMap(t, ns, "proxy.conf", map[string]string{"k": "0"})
	one := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labelsFor("web"), Annotations: map[string]string{keys.optIn: "enabled"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("web")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("web")}, Spec: podSpec(t, `
volumes: [{name: proxy, configMap: {name: proxy.conf}}]
containers:
- {name: app, image: example/app:1, env: [{name: LEVEL, value: debug}], envFrom: [{configMapRef: {name: app-config}}]}
- {name: proxy, image: example/proxy:1, volumeMounts: [{name: proxy, mountPath: /etc/proxy}]}`)},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app, proxy := sourceID("configmap", ns, "app-config"), sourceID("configmap", ns, "proxy.conf")
	waitAppliedUnder(t, keys.applied, ns, "web", map[string]string{
		app: currentChecksum(t, "configmap", ns, "app-config", nil), proxy: currentChecksum(t, "configmap", ns, "proxy.conf", nil)})
	waitReplicaSets(t, ns, "web", 1)

	setConfigMapKey(t, ns, "app-config", "k", "1")
	appSum := currentChecksum(t, "configmap", ns, "app-config", nil)
	waitAppliedUnder(t, keys.applied, ns, "web", map[string]string{app: appSum})
	rs := waitReplicaSets(t, ns, "web", 2)
	wantEnv := map[string][]corev1.EnvVar{
		"app":   {{Name: "LEVEL", Value: "debug"}, {Name: "STAKATER_APP_CONFIG_CONFIGMAP", Value: appSum}},
		"proxy": nil,
	}
	checkEnv(t, "after the app's ConfigMap changed", rs.Spec.Template.Spec.Containers, wantEnv)
	if _, stamped := rs.Spec.Template.Annotations[keys.timestamp]; stamped {
		t.Error("the restart timestamp was written too")
	}
	waitPodsRun(t, ns, "web", rs, "STAKATER_APP_CONFIG_CONFIGMAP", appSum)

	// Labels only: no data changed, nothing restarts.
	updateConfigMap(t, ns, "app-config", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"touched": "yes"} })
	setConfigMapKey(t, ns, "proxy.conf", "k", "1")
	proxySum := currentChecksum(t, "configmap", ns, "proxy.conf", nil)
	waitAppliedUnder(t, keys.applied, ns, "web", map[string]string{app: appSum, proxy: proxySum})
	rs = waitReplicaSets(t, ns, "web", 3)
	wantEnv["proxy"] = []corev1.EnvVar{{Name: "STAKATER_PROXY_CONF_CONFIGMAP", Value: proxySum}}
	checkEnv(t, "after the proxy's ConfigMap changed", rs.Spec.Template.Spec.Containers, wantEnv)
	// Nothing more comes: one restart per change, none for the labels.
	assertReplicaSetsStay(t, ns, "web", 3)
}

// waitAppliedUnder waits until the workload's applied checksums, under the
// annotation key, hold want for every source named there.
func waitAppliedUnder(t *testing.T, key, ns, name string, want map[string]string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("applied checksums %v on %s/%s", want, ns, name), func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		applied := map[string]string{}
		if raw, ok := d.Annotations[key]; !ok || json.Unmarshal([]byte(raw), &applied) != nil {
			return false, nil
		}
		for k, v := range want {
			if applied[k] != v {
				return false, fmt.Errorf("%s: %q, want %q", k, applied[k], v)
			}
		}
		return true, nil
	})
}

// waitReplicaSets waits for the Deployment's n-th ReplicaSet (1 + restarts)
// and returns the newest; more than n fails at once.
func waitReplicaSets(t *testing.T, ns, name string, n int) appsv1.ReplicaSet {
	t.Helper()
	var newest appsv1.ReplicaSet
	waitFor(t, fmt.Sprintf("%d ReplicaSets of %s/%s", n, ns, name), func() (bool, error) {
		list, err := env.kube.AppsV1().ReplicaSets(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		if len(list.Items) > n {
			t.Fatalf("%d ReplicaSets of %s/%s, want %d: restarted too often", len(list.Items), ns, name, n)
		}
		for _, rs := range list.Items {
			if rs.Annotations["deployment.kubernetes.io/revision"] == fmt.Sprint(n) {
				newest = rs
			}
		}
		return len(list.Items) == n && newest.Name != "", nil
	})
	return newest
}

// assertReplicaSetsStay watches for quietFor that no ReplicaSet comes.
func assertReplicaSetsStay(t *testing.T, ns, name string, n int) {
	t.Helper()
	for end := time.Now().Add(quietFor); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		list, err := env.kube.AppsV1().ReplicaSets(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != n {
			t.Fatalf("%d ReplicaSets of %s/%s, want %d", len(list.Items), ns, name, n)
		}
	}
}

// checkEnv compares each container's env with want (by container name).
func checkEnv(t *testing.T, when string, containers []corev1.Container, want map[string][]corev1.EnvVar) {
	t.Helper()
	for _, c := range containers {
		got := c.Env
		if len(got) == 0 {
			got = nil
		}
		if fmt.Sprint(got) != fmt.Sprint(want[c.Name]) {
			t.Errorf("%s: container %s env %v, want %v", when, c.Name, got, want[c.Name])
		}
	}
}

// waitPodsRun waits until the ReplicaSet's pods, and only they, run the
// Deployment, each with the variable's value.
func waitPodsRun(t *testing.T, ns, name string, rs appsv1.ReplicaSet, variable, value string) {
	t.Helper()
	hash := rs.Labels["pod-template-hash"]
	waitFor(t, fmt.Sprintf("pods of %s/%s from ReplicaSet %s", ns, name, rs.Name), func() (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Labels["pod-template-hash"] != hash {
				return false, fmt.Errorf("pod %s from another template", p.Name)
			}
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == variable && e.Value != value {
					return false, fmt.Errorf("pod %s: %s=%q", p.Name, variable, e.Value)
				}
			}
			running++
		}
		return running == 1, nil
	})
}

// Re-applying a manifest from git after an envVar restart keeps the
// variable and rolls nothing: client-side apply merges env by name and
// removes only what it applied before, and server-side apply by another
// field manager leaves the entry restart-controller set (operations.md,
// "GitOps").
func TestGitOpsReapplyKeepsEnvVars(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	keys := keysFor("envgit")
	startEnvVarController(t, ns, keys)
	createConfigMap(t, ns, "app", map[string]string{"k": "1"})
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: `+ns+`
  labels: {app: web}
  annotations: {`+keys.optIn+`: enabled}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: example/app:1, env: [{name: LEVEL, value: debug}], envFrom: [{configMapRef: {name: app}}]}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := func(args ...string) {
		t.Helper()
		if out, err := env.cluster.Kubectl(ctxFor(t), append([]string{"apply", "-f", manifest}, args...)...); err != nil {
			t.Fatalf("kubectl apply %v: %v\n%s", args, err, out)
		}
	}
	source := sourceID("configmap", ns, "app")
	apply()
	waitAppliedUnder(t, keys.applied, ns, "web", map[string]string{source: currentChecksum(t, "configmap", ns, "app", nil)})
	waitReplicaSets(t, ns, "web", 1)
	setConfigMapKey(t, ns, "app", "k", "2")
	sum := currentChecksum(t, "configmap", ns, "app", nil)
	waitAppliedUnder(t, keys.applied, ns, "web", map[string]string{source: sum})
	waitReplicaSets(t, ns, "web", 2)
	want := map[string][]corev1.EnvVar{"app": {{Name: "LEVEL", Value: "debug"}, {Name: "STAKATER_APP_CONFIGMAP", Value: sum}}}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"client-side apply (kubectl, Argo CD)", nil},
		{"server-side apply by another field manager (Flux)", []string{"--server-side", "--field-manager", "flux-kustomize-controller", "--force-conflicts"}},
	} {
		apply(tc.args...)
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkEnv(t, "after "+tc.name, d.Spec.Template.Spec.Containers, want)
	}
	assertReplicaSetsStay(t, ns, "web", 2)
}
