package e2e

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every reference form of examples/config.yaml restarts the workload that
// uses it when the data it reads changes, exactly once.
func TestEveryReferenceForm(t *testing.T) {
	ns := newNamespace(t)
	forms := []struct {
		name, kind, fragment string
	}{
		{"volume-configmap", "configmap", `volumes: [{name: v, configMap: {name: CFG}}]`},
		{"volume-configmap-items", "configmap", `volumes: [{name: v, configMap: {name: CFG, items: [{key: a, path: a.txt}]}}]`},
		{"volume-secret", "secret", `volumes: [{name: v, secret: {secretName: CFG}}]`},
		{"volume-secret-items", "secret", `volumes: [{name: v, secret: {secretName: CFG, items: [{key: a, path: a.txt}]}}]`},
		{"projected-configmap", "configmap", `volumes: [{name: v, projected: {sources: [{configMap: {name: CFG}}]}}]`},
		{"projected-secret", "secret", `volumes: [{name: v, projected: {sources: [{secret: {name: CFG, items: [{key: a, path: a}]}}]}}]`},
		{"envfrom-configmap", "configmap", `containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: CFG}}]}]`},
		{"envfrom-secret", "secret", `containers: [{name: app, image: example/app:1, envFrom: [{secretRef: {name: CFG}}]}]`},
		{"env-configmap-key", "configmap", `containers: [{name: app, image: example/app:1, env: [{name: A, valueFrom: {configMapKeyRef: {name: CFG, key: a}}}]}]`},
		{"env-secret-key", "secret", `containers: [{name: app, image: example/app:1, env: [{name: A, valueFrom: {secretKeyRef: {name: CFG, key: a}}}]}]`},
		{"init-envfrom-configmap", "configmap", `initContainers: [{name: init, image: example/init:1, envFrom: [{configMapRef: {name: CFG}}]}]`},
		{"init-env-secret-key", "secret", `initContainers: [{name: init, image: example/init:1, env: [{name: A, valueFrom: {secretKeyRef: {name: CFG, key: a}}}]}]`},
	}
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			t.Parallel()
			cfg := "cfg-" + form.name
			data := map[string]string{"a": "1", "b": "1"}
			if form.kind == "secret" {
				createSecret(t, ns, cfg, data)
			} else {
				createConfigMap(t, ns, cfg, data)
			}
			spec := podSpec(t, replaceName(form.fragment, cfg))
			createDeployment(t, ns, form.name, spec, workloadOptions{optIn: true})
			waitRecorded(t, deploymentsGVR, ns, form.name, fmt.Sprintf("%s/%s/%s", form.kind, ns, cfg))
			waitDeploymentRestarts(t, ns, form.name, 0)
			if form.kind == "secret" {
				setSecretKey(t, ns, cfg, "a", "2")
			} else {
				setConfigMapKey(t, ns, cfg, "a", "2")
			}
			waitDeploymentRestarts(t, ns, form.name, 1)
		})
	}
}

func replaceName(fragment, name string) string {
	out := []byte{}
	for i := 0; i < len(fragment); i++ {
		if i+3 <= len(fragment) && fragment[i:i+3] == "CFG" {
			out = append(out, name...)
			i += 2
			continue
		}
		out = append(out, fragment[i])
	}
	return string(out)
}

// Changes the pods cannot see restart nothing: a key they do not read, a
// label of the config, a workload that has not opted in or opted out. A
// witness that reads the whole config proves each change was processed.
func TestChangesThatRestartNothing(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "shared", map[string]string{"read": "1", "unread": "1"})
	keyRef := podSpec(t, `containers: [{name: app, image: example/app:1, env: [{name: R, valueFrom: {configMapKeyRef: {name: shared, key: read}}}]}]`)
	whole := podSpec(t, `containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: shared}}]}]`)
	createDeployment(t, ns, "key-reader", keyRef, workloadOptions{optIn: true})
	createDeployment(t, ns, "not-opted-in", whole, workloadOptions{optIn: false})
	createDeployment(t, ns, "opts-out", whole, workloadOptions{optIn: true})
	createDeployment(t, ns, "witness", whole, workloadOptions{optIn: true})
	for _, name := range []string{"key-reader", "opts-out", "witness"} {
		waitRecorded(t, deploymentsGVR, ns, name, "configmap/"+ns+"/shared")
	}
	// Opting out: any other value than "enabled" stops restarts.
	_, err := env.kube.AppsV1().Deployments(ns).Patch(ctxFor(t), "opts-out", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+optInKey+`":"disabled"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keyReader := getWorkload(t, deploymentsGVR, ns, "key-reader")
	notOptedIn := getWorkload(t, deploymentsGVR, ns, "not-opted-in")
	optsOut := getWorkload(t, deploymentsGVR, ns, "opts-out")

	// A label change only: the witness must not restart either; a later data
	// change of the same config, seen after it in order, proves it was seen.
	updateConfigMap(t, ns, "shared", func(cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{"touched": "yes"}
		cm.Annotations = map[string]string{"note": "metadata only"}
	})
	setConfigMapKey(t, ns, "shared", "unread", "2")
	waitDeploymentRestarts(t, ns, "witness", 1)
	waitIdle(t, env.controller)
	assertNotRestarted(t, deploymentsGVR, ns, "key-reader", keyReader)
	assertNotRestarted(t, deploymentsGVR, ns, "not-opted-in", notOptedIn)
	assertNotRestarted(t, deploymentsGVR, ns, "opts-out", optsOut)

	// Control: the key it reads does restart the key reader.
	setConfigMapKey(t, ns, "shared", "read", "2")
	waitDeploymentRestarts(t, ns, "key-reader", 1)
	waitDeploymentRestarts(t, ns, "witness", 2)
	waitIdle(t, env.controller)
	assertNotRestarted(t, deploymentsGVR, ns, "not-opted-in", notOptedIn)
	assertNotRestarted(t, deploymentsGVR, ns, "opts-out", optsOut)
}

// Five quick changes of one config, and changes of two configs of one
// workload, fall in one grace period and cause one restart.
func TestBurstsMergeIntoOneRestart(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "one", map[string]string{"k": "0"})
	createSecret(t, ns, "two", map[string]string{"k": "0"})
	createDeployment(t, ns, "five-changes", podSpec(t, `volumes: [{name: v, configMap: {name: one}}]`), workloadOptions{optIn: true})
	createConfigMap(t, ns, "three", map[string]string{"k": "0"})
	createDeployment(t, ns, "two-configs", podSpec(t, `
volumes: [{name: v, configMap: {name: three}}]
containers: [{name: app, image: example/app:1, envFrom: [{secretRef: {name: two}}]}]`), workloadOptions{optIn: true})
	waitRecorded(t, deploymentsGVR, ns, "five-changes", "configmap/"+ns+"/one")
	waitRecorded(t, deploymentsGVR, ns, "two-configs", "configmap/"+ns+"/three", "secret/"+ns+"/two")

	for i := 1; i <= 5; i++ {
		setConfigMapKey(t, ns, "one", "k", fmt.Sprint(i))
	}
	setConfigMapKey(t, ns, "three", "k", "1")
	setSecretKey(t, ns, "two", "k", "1")

	waitDeploymentRestarts(t, ns, "five-changes", 1)
	waitDeploymentRestarts(t, ns, "two-configs", 1)
	waitIdle(t, env.controller)
	waitDeploymentRestarts(t, ns, "five-changes", 1)
	waitDeploymentRestarts(t, ns, "two-configs", 1)
}

// One config read by several workloads restarts each of them once; the
// same-named config in another namespace restarts none of them.
func TestSharedConfigAndNamespaces(t *testing.T) {
	ns := newNamespace(t)
	other := newNamespace(t)
	createConfigMap(t, ns, "app-config", map[string]string{"k": "0"})
	createConfigMap(t, other, "app-config", map[string]string{"k": "0"})
	spec := podSpec(t, `volumes: [{name: v, configMap: {name: app-config}}]`)
	readers := []string{"reader-1", "reader-2", "reader-3"}
	for _, name := range readers {
		createDeployment(t, ns, name, spec, workloadOptions{optIn: true})
	}
	createDeployment(t, other, "other-witness", spec, workloadOptions{optIn: true})
	for _, name := range readers {
		waitRecorded(t, deploymentsGVR, ns, name, "configmap/"+ns+"/app-config")
	}
	waitRecorded(t, deploymentsGVR, other, "other-witness", "configmap/"+other+"/app-config")
	before := map[string]workloadState{}
	for _, name := range readers {
		before[name] = getWorkload(t, deploymentsGVR, ns, name)
	}

	setConfigMapKey(t, other, "app-config", "k", "1")
	waitDeploymentRestarts(t, other, "other-witness", 1)
	waitIdle(t, env.controller)
	for _, name := range readers {
		assertNotRestarted(t, deploymentsGVR, ns, name, before[name])
	}

	setConfigMapKey(t, ns, "app-config", "k", "1")
	for _, name := range readers {
		waitDeploymentRestarts(t, ns, name, 1)
	}
	waitIdle(t, env.controller)
	waitDeploymentRestarts(t, other, "other-witness", 1)
}

// A workload created against configs that already exist is never restarted:
// its checksums are recorded. An optional config that appears later restarts
// it; a required one that appears does not (the pods were waiting for it).
func TestNewWorkloadsAndAppearingConfigs(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "existing", map[string]string{"k": "0"})
	createDeployment(t, ns, "new-workload", podSpec(t, `volumes: [{name: v, configMap: {name: existing}}]`), workloadOptions{optIn: true})
	createDeployment(t, ns, "waits-optional", podSpec(t, `volumes: [{name: v, configMap: {name: later-optional, optional: true}}]`), workloadOptions{optIn: true})
	createDeployment(t, ns, "waits-required", podSpec(t, `
containers: [{name: app, image: example/app:1, env: [{name: X, valueFrom: {secretKeyRef: {name: later-required, key: x}}}]}]`), workloadOptions{optIn: true, replicas: 1})
	applied := waitRecorded(t, deploymentsGVR, ns, "new-workload", "configmap/"+ns+"/existing")
	if applied["configmap/"+ns+"/existing"] == "" {
		t.Fatalf("checksum of an existing config recorded as absent: %v", applied)
	}
	waitRecorded(t, deploymentsGVR, ns, "waits-optional", "configmap/"+ns+"/later-optional")
	waitRecorded(t, deploymentsGVR, ns, "waits-required", "secret/"+ns+"/later-required")
	waitDeploymentRestarts(t, ns, "new-workload", 0)
	required := getWorkload(t, deploymentsGVR, ns, "waits-required")

	createConfigMap(t, ns, "later-optional", map[string]string{"k": "0"})
	createSecret(t, ns, "later-required", map[string]string{"x": "0"})
	waitDeploymentRestarts(t, ns, "waits-optional", 1)
	waitIdle(t, env.controller)
	assertNotRestarted(t, deploymentsGVR, ns, "waits-required", required)
	applied = waitRecorded(t, deploymentsGVR, ns, "waits-required", "secret/"+ns+"/later-required")
	if applied["secret/"+ns+"/later-required"] == "" {
		t.Fatalf("required config's checksum not recorded after it appeared: %v", applied)
	}
	waitDeploymentRestarts(t, ns, "new-workload", 0)
}

// A deleted config restarts nothing; re-created with the data the pods
// started with it restarts nothing either; with other data it restarts.
func TestDeletedAndRecreatedConfig(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "flaky", map[string]string{"k": "0"})
	createConfigMap(t, ns, "witness-config", map[string]string{"k": "0"})
	createDeployment(t, ns, "reader", podSpec(t, `volumes: [{name: v, configMap: {name: flaky, optional: true}}]`), workloadOptions{optIn: true})
	createDeployment(t, ns, "witness", podSpec(t, `volumes: [{name: v, configMap: {name: witness-config}}]`), workloadOptions{optIn: true})
	waitRecorded(t, deploymentsGVR, ns, "reader", "configmap/"+ns+"/flaky")
	waitRecorded(t, deploymentsGVR, ns, "witness", "configmap/"+ns+"/witness-config")
	before := getWorkload(t, deploymentsGVR, ns, "reader")

	if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctxFor(t), "flaky", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, ns, "flaky", map[string]string{"k": "0"})
	setConfigMapKey(t, ns, "witness-config", "k", "1")
	waitDeploymentRestarts(t, ns, "witness", 1)
	waitIdle(t, env.controller)
	assertNotRestarted(t, deploymentsGVR, ns, "reader", before)

	if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctxFor(t), "flaky", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, ns, "flaky", map[string]string{"k": "changed"})
	waitDeploymentRestarts(t, ns, "reader", 1)
}
