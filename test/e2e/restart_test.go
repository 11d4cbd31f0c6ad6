package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every reference form of examples/config.yaml restarts the workload that
// uses it when the data it reads changes, exactly once.
func TestEveryReferenceForm(t *testing.T) {
	t.Parallel()
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

// Changes the pods cannot see restart nothing: a label of the source, a key
// they do not read, a workload that has not opted in or opted out. A witness
// reading the whole source shows the key change was acted on; an ordering
// witness, changed after each step, shows every decision of the step was taken
// before the workloads left alone are checked.
func TestChangesThatRestartNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "shared", map[string]string{"read": "1", "unread": "1"})
	keyRef := podSpec(t, `containers: [{name: app, image: example/app:1, env: [{name: R, valueFrom: {configMapKeyRef: {name: shared, key: read}}}]}]`)
	whole := podSpec(t, `containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: shared}}]}]`)
	createDeployment(t, ns, "key-reader", keyRef, workloadOptions{optIn: true})
	createDeployment(t, ns, "not-opted-in", whole, workloadOptions{optIn: false})
	createDeployment(t, ns, "opts-out", whole, workloadOptions{optIn: true})
	createDeployment(t, ns, "witness", whole, workloadOptions{optIn: true})
	shared := sourceID("configmap", ns, "shared")
	for _, name := range []string{"key-reader", "opts-out", "witness"} {
		waitRecorded(t, deploymentsGVR, ns, name, shared)
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
	witness := getWorkload(t, deploymentsGVR, ns, "witness")

	// Labels and annotations of the source only: nothing restarts, not even
	// the witness that reads every key.
	updateConfigMap(t, ns, "shared", func(cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{"touched": "yes"}
		cm.Annotations = map[string]string{"note": "metadata only"}
	})
	later.after(t)
	assertNotRestarted(t, deploymentsGVR, ns, "witness", witness)
	assertNotRestarted(t, deploymentsGVR, ns, "key-reader", keyReader)
	assertNotRestarted(t, deploymentsGVR, ns, "not-opted-in", notOptedIn)
	assertNotRestarted(t, deploymentsGVR, ns, "opts-out", optsOut)

	// A key only the witness reads: the witness restarts, nothing else.
	setConfigMapKey(t, ns, "shared", "unread", "2")
	later.after(t)
	waitDeploymentRestarts(t, ns, "witness", 1)
	assertNotRestarted(t, deploymentsGVR, ns, "key-reader", keyReader)
	assertNotRestarted(t, deploymentsGVR, ns, "not-opted-in", notOptedIn)
	assertNotRestarted(t, deploymentsGVR, ns, "opts-out", optsOut)

	// Control: the key it reads does restart the key reader, once.
	setConfigMapKey(t, ns, "shared", "read", "2")
	later.after(t)
	waitApplied(t, deploymentsGVR, ns, "key-reader", map[string]string{shared: currentChecksum(t, "configmap", ns, "shared", []string{"read"})})
	waitDeploymentRestarts(t, ns, "key-reader", 1)
	waitDeploymentRestarts(t, ns, "witness", 2)
	assertNotRestarted(t, deploymentsGVR, ns, "not-opted-in", notOptedIn)
	assertNotRestarted(t, deploymentsGVR, ns, "opts-out", optsOut)
}

// Five quick changes of one source fall in one grace period and cause one
// restart; so do changes of two sources (a ConfigMap and a Secret) of one
// workload. The test runs its own controller with a grace period long enough
// for seven writes on a loaded machine, and checks the ordering it depends on
// rather than trusting it: every write returned before the grace period of
// the first could end, and the restarts came after every write.
func TestBurstsMergeIntoOneRestart(t *testing.T) {
	t.Parallel()
	const grace = 8 * time.Second
	ns := newNamespace(t)
	keys := keysFor("burst")
	// Everything exists before the controller starts: the creation of a
	// source opens a grace period too, which a burst could fall into.
	createConfigMap(t, ns, "one", map[string]string{"k": "0"})
	createSecret(t, ns, "two", map[string]string{"k": "0"})
	createConfigMap(t, ns, "three", map[string]string{"k": "0"})
	createKeyedDeployment(t, ns, "five-changes", podSpec(t, `volumes: [{name: v, configMap: {name: one}}]`), keys)
	createKeyedDeployment(t, ns, "two-sources", podSpec(t, `
volumes: [{name: v, configMap: {name: three}}]
containers: [{name: app, image: example/app:1, envFrom: [{secretRef: {name: two}}]}]`), keys)
	laterConfigMap := newKeyedWitness(t, ns, "configmap", keys)
	laterSecret := newKeyedWitness(t, ns, "secret", keys)
	p, err := env.startController(ctxFor(t), "burst", isolatedConfig(t, "burst", ns, keys, nil),
		"--restart-grace-period", grace.String(), "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	logTailOnFailure(t, "burst", &p)
	laterConfigMap.wait(t)
	laterSecret.wait(t)
	one, two, three := sourceID("configmap", ns, "one"), sourceID("secret", ns, "two"), sourceID("configmap", ns, "three")
	recorded := map[string]keyedState{
		"five-changes": waitKeyedApplied(t, ns, "five-changes", keys, map[string]string{one: currentChecksum(t, "configmap", ns, "one", nil)}),
		"two-sources": waitKeyedApplied(t, ns, "two-sources", keys, map[string]string{
			two: currentChecksum(t, "secret", ns, "two", nil), three: currentChecksum(t, "configmap", ns, "three", nil)}),
	}
	const restartsMetric = "deployment_restart_controller_deployment_restarts_total"
	restartsBefore, err := p.Metric(restartsMetric)
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now() // no grace period of these writes can end before began+grace
	for i := 1; i <= 5; i++ {
		setConfigMapKey(t, ns, "one", "k", fmt.Sprint(i))
	}
	setConfigMapKey(t, ns, "three", "k", "1")
	setSecretKey(t, ns, "two", "k", "1")
	written := time.Now()
	if took := written.Sub(began); took >= grace {
		t.Fatalf("the seven writes took %s, not less than the grace period (%s): this machine is too slow for "+
			"the test to prove merging (a restart between the writes would be right); raise the grace period", took, grace)
	}
	// Written after the burst, the witnesses' changes end their grace periods
	// after the burst's, so once both restarted every burst decision was taken.
	laterConfigMap.change(t)
	laterSecret.change(t)
	laterConfigMap.wait(t)
	laterSecret.wait(t)

	want := map[string]map[string]string{
		"five-changes": {one: currentChecksum(t, "configmap", ns, "one", nil)},
		"two-sources":  {two: currentChecksum(t, "secret", ns, "two", nil), three: currentChecksum(t, "configmap", ns, "three", nil)},
	}
	for _, name := range []string{"five-changes", "two-sources"} {
		s := waitKeyedApplied(t, ns, name, keys, want[name])
		stamp, err := time.Parse(time.RFC3339Nano, s.restartedAt)
		if err != nil || s.restartedAt == recorded[name].restartedAt {
			t.Fatalf("%s: the last data was recorded without a restart (timestamp %q)", name, s.restartedAt)
		}
		if stamp.Before(began.Add(grace)) {
			t.Fatalf("%s restarted at %s, before the grace period of the first write (%s at the earliest) could end",
				name, s.restartedAt, began.Add(grace).Format(time.RFC3339Nano))
		}
		if n := replicaSetsOf(t, ns, name); n != 2 {
			t.Fatalf("%s has %d ReplicaSets after the burst, want 2 (one restart)", name, n)
		}
	}
	// Restart patches, counted by the controller itself: one per burst
	// workload and one per witness.
	restarts, err := p.Metric(restartsMetric)
	if err != nil {
		t.Fatal(err)
	}
	if got := restarts - restartsBefore; got != 4 {
		t.Fatalf("the controller made %.0f restarts, want 4 (five-changes, two-sources and two witnesses)", got)
	}
	merged, _ := p.Metric("restart_controller_changes_merged_total")
	t.Logf("burst: seven writes in %s (grace period %s), %.0f changes merged, one restart each",
		written.Sub(began).Round(time.Millisecond), grace, merged)
}

// One source read by several workloads restarts each of them once; the
// same-named source in another namespace restarts none of them.
func TestSharedSourceAndNamespaces(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	other := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "app-source", map[string]string{"k": "0"})
	createConfigMap(t, other, "app-source", map[string]string{"k": "0"})
	spec := podSpec(t, `volumes: [{name: v, configMap: {name: app-source}}]`)
	readers := []string{"reader-1", "reader-2", "reader-3"}
	for _, name := range readers {
		createDeployment(t, ns, name, spec, workloadOptions{optIn: true})
	}
	createDeployment(t, other, "other-witness", spec, workloadOptions{optIn: true})
	for _, name := range readers {
		waitRecorded(t, deploymentsGVR, ns, name, sourceID("configmap", ns, "app-source"))
	}
	waitRecorded(t, deploymentsGVR, other, "other-witness", sourceID("configmap", other, "app-source"))
	before := map[string]workloadState{}
	for _, name := range readers {
		before[name] = getWorkload(t, deploymentsGVR, ns, name)
	}

	setConfigMapKey(t, other, "app-source", "k", "1")
	later.after(t) // one informer watches every namespace: it orders both
	waitDeploymentRestarts(t, other, "other-witness", 1)
	for _, name := range readers {
		assertNotRestarted(t, deploymentsGVR, ns, name, before[name])
	}
	otherWitness := getWorkload(t, deploymentsGVR, other, "other-witness")

	setConfigMapKey(t, ns, "app-source", "k", "1")
	later.after(t)
	for _, name := range readers {
		waitDeploymentRestarts(t, ns, name, 1)
	}
	assertNotRestarted(t, deploymentsGVR, other, "other-witness", otherWitness)
}

// A workload created against sources that already exist is never restarted:
// its checksums are recorded. An optional source that appears later restarts
// it; a required one that appears does not (the pods were waiting for it).
func TestNewWorkloadsAndAppearingSources(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createConfigMap(t, ns, "existing", map[string]string{"k": "0"})
	createDeployment(t, ns, "new-workload", podSpec(t, `volumes: [{name: v, configMap: {name: existing}}]`), workloadOptions{optIn: true})
	createDeployment(t, ns, "waits-optional", podSpec(t, `volumes: [{name: v, configMap: {name: later-optional, optional: true}}]`), workloadOptions{optIn: true})
	createDeployment(t, ns, "waits-required", podSpec(t, `
containers: [{name: app, image: example/app:1, env: [{name: X, valueFrom: {secretKeyRef: {name: later-required, key: x}}}]}]`), workloadOptions{optIn: true, replicas: 1})
	existing, optional, required := sourceID("configmap", ns, "existing"), sourceID("configmap", ns, "later-optional"), sourceID("secret", ns, "later-required")
	applied := waitRecorded(t, deploymentsGVR, ns, "new-workload", existing)
	if want := currentChecksum(t, "configmap", ns, "existing", nil); applied[existing] != want {
		t.Fatalf("checksum of an existing source recorded as %q, want %q: %v", applied[existing], want, applied)
	}
	waitRecorded(t, deploymentsGVR, ns, "waits-optional", optional)
	waitRecorded(t, deploymentsGVR, ns, "waits-required", required)
	waitDeploymentRestarts(t, ns, "new-workload", 0)
	waitsRequired := getWorkload(t, deploymentsGVR, ns, "waits-required")

	createConfigMap(t, ns, "later-optional", map[string]string{"k": "0"})
	createSecret(t, ns, "later-required", map[string]string{"x": "0"})
	waitDeploymentRestarts(t, ns, "waits-optional", 1)
	waitApplied(t, deploymentsGVR, ns, "waits-optional", map[string]string{optional: currentChecksum(t, "configmap", ns, "later-optional", nil)})
	// Recording the required source's checksum is the decision: a restart
	// would have come with it, in the same patch.
	waitApplied(t, deploymentsGVR, ns, "waits-required", map[string]string{required: currentChecksum(t, "secret", ns, "later-required", []string{"x"})})
	assertNotRestarted(t, deploymentsGVR, ns, "waits-required", waitsRequired)
	waitDeploymentRestarts(t, ns, "new-workload", 0)
}

// A source deleted and re-created within its grace period is one decision:
// re-created with the data the pods started with, it restarts nothing; with
// other data it restarts (TestSourceDeletion deletes for good).
func TestDeletedAndRecreatedSource(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "flaky", map[string]string{"k": "0"})
	createDeployment(t, ns, "reader", podSpec(t, `volumes: [{name: v, configMap: {name: flaky, optional: true}}]`), workloadOptions{optIn: true})
	flaky := sourceID("configmap", ns, "flaky")
	waitRecorded(t, deploymentsGVR, ns, "reader", flaky)
	waitDeploymentRestarts(t, ns, "reader", 0) // its first ReplicaSet exists: the snapshot counts it
	before := getWorkload(t, deploymentsGVR, ns, "reader")
	startedWith := currentChecksum(t, "configmap", ns, "flaky", nil)

	if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctxFor(t), "flaky", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, ns, "flaky", map[string]string{"k": "0"})
	later.after(t)
	assertNotRestarted(t, deploymentsGVR, ns, "reader", before)
	waitApplied(t, deploymentsGVR, ns, "reader", map[string]string{flaky: startedWith})

	if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctxFor(t), "flaky", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, ns, "flaky", map[string]string{"k": "changed"})
	waitDeploymentRestarts(t, ns, "reader", 1)
	waitApplied(t, deploymentsGVR, ns, "reader", map[string]string{flaky: currentChecksum(t, "configmap", ns, "flaky", nil)})
}
