package e2e

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// largeSourceKeys is far above catalog.MaxDigestKeys: the controller caches
// only the whole-data checksums of such a source, and reads the keys a
// workload reads of it from the API server when it decides.
const largeSourceKeys = 5000

// A source with too many keys to cache a digest each still
// restarts exactly the workloads whose data changed: a Deployment reading one
// key by configMapKeyRef restarts once when that key changes and not when
// another one does, and one reading the whole object restarts on any data
// change. The checksums recorded are those this test computes from the
// object with one digest per key, so the two forms agree byte for byte.
func TestLargeSource(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	data := make(map[string]string, largeSourceKeys+1)
	for i := range largeSourceKeys {
		data[fmt.Sprintf("k%04d", i)] = ""
	}
	data["read"] = "1"
	createConfigMap(t, ns, "large", data)
	createDeployment(t, ns, "key-reader", podSpec(t,
		`containers: [{name: app, image: example/app:1, env: [{name: R, valueFrom: {configMapKeyRef: {name: large, key: read}}}]}]`),
		workloadOptions{optIn: true})
	createDeployment(t, ns, "whole-reader", podSpec(t,
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: large}}]}]`),
		workloadOptions{optIn: true})
	large := sourceID("configmap", ns, "large")
	readKey := []string{"read"}
	waitApplied(t, deploymentsGVR, ns, "key-reader", map[string]string{large: currentChecksum(t, "configmap", ns, "large", readKey)})
	waitApplied(t, deploymentsGVR, ns, "whole-reader", map[string]string{large: currentChecksum(t, "configmap", ns, "large", nil)})
	waitDeploymentRestarts(t, ns, "key-reader", 0)
	waitDeploymentRestarts(t, ns, "whole-reader", 0)
	keyReader := getWorkload(t, deploymentsGVR, ns, "key-reader")

	// Labels only: no data change, nothing restarts.
	updateConfigMap(t, ns, "large", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"touched": "yes"} })
	later.after(t)
	assertNotRestarted(t, deploymentsGVR, ns, "key-reader", keyReader)
	waitDeploymentRestarts(t, ns, "whole-reader", 0)

	// A key the key reader does not read: only the whole reader restarts.
	setConfigMapKey(t, ns, "large", "k0042", "changed")
	waitDeploymentRestarts(t, ns, "whole-reader", 1)
	later.after(t)
	assertNotRestarted(t, deploymentsGVR, ns, "key-reader", keyReader)
	waitApplied(t, deploymentsGVR, ns, "whole-reader", map[string]string{large: currentChecksum(t, "configmap", ns, "large", nil)})

	// The key it reads: it restarts, once, recording the new data's checksum.
	setConfigMapKey(t, ns, "large", "read", "2")
	waitDeploymentRestarts(t, ns, "key-reader", 1)
	waitApplied(t, deploymentsGVR, ns, "key-reader", map[string]string{large: currentChecksum(t, "configmap", ns, "large", readKey)})
	waitDeploymentRestarts(t, ns, "whole-reader", 2)
	later.after(t)
	waitDeploymentRestarts(t, ns, "key-reader", 1)
	waitDeploymentRestarts(t, ns, "whole-reader", 2)
}

// The same for a Secret read by secretKeyRef: Secrets are decoded and read
// on demand like ConfigMaps, and their checksums are those of the per-key
// form too.
func TestLargeSourceSecret(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	later := newKeyedWitness(t, ns, "secret", suiteKeys)
	later.wait(t)
	later.change(t) // closes the grace period of the witness's creation
	data := make(map[string]string, largeSourceKeys+1)
	for i := range largeSourceKeys {
		data[fmt.Sprintf("k%04d", i)] = "x"
	}
	data["read"] = "1"
	createSecret(t, ns, "large", data)
	createDeployment(t, ns, "key-reader", podSpec(t,
		`containers: [{name: app, image: example/app:1, env: [{name: R, valueFrom: {secretKeyRef: {name: large, key: read}}}]}]`),
		workloadOptions{optIn: true})
	large := sourceID("secret", ns, "large")
	readKey := []string{"read"}
	waitApplied(t, deploymentsGVR, ns, "key-reader", map[string]string{large: currentChecksum(t, "secret", ns, "large", readKey)})
	waitDeploymentRestarts(t, ns, "key-reader", 0)
	keyReader := getWorkload(t, deploymentsGVR, ns, "key-reader")

	setSecretKey(t, ns, "large", "k0042", "changed")
	later.after(t)
	assertNotRestarted(t, deploymentsGVR, ns, "key-reader", keyReader)

	setSecretKey(t, ns, "large", "read", "2")
	waitDeploymentRestarts(t, ns, "key-reader", 1)
	waitApplied(t, deploymentsGVR, ns, "key-reader", map[string]string{large: currentChecksum(t, "secret", ns, "large", readKey)})
	later.after(t)
	waitDeploymentRestarts(t, ns, "key-reader", 1)
}
