package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Issue 8, "exactly the restarts needed": the restarts counted here are
// changes of the pod template, as new ReplicaSets (a Deployment's generation
// is no count: annotation-only patches bump it too). A workload that must not
// be restarted is checked after a witness reading the same source has been
// restarted at the end of the grace period and the controller is idle, so a
// second rollout would have happened by then.

const templateHashKey = "com.xing.deployment-restart.applied-template-hash"

// editTemplate changes the Deployment's pod template the way a release does:
// a label of the template, so the Deployment rolls a new ReplicaSet.
func editTemplate(t *testing.T, ns, name, value string) {
	t.Helper()
	_, err := env.kube.AppsV1().Deployments(ns).Patch(ctxFor(t), name, types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"metadata":{"labels":{"release":"`+value+`"}}}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("editing the template of %s/%s: %v", ns, name, err)
	}
}

// waitRollouts waits until the Deployment has had exactly n rollouts after its
// first (n+1 ReplicaSets), whoever changed the template, and the newest one is
// fully rolled out. More ReplicaSets than that fail at once.
func waitRollouts(t *testing.T, ns, name string, n int) {
	t.Helper()
	ctx := ctxFor(t)
	waitFor(t, fmt.Sprintf("deployment %s/%s with %d rollout(s) after its first, rolled out", ns, name, n), func() (bool, error) {
		rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		if got := len(rss.Items) - 1; got != n {
			if got > n {
				t.Fatalf("deployment %s/%s rolled out %d times after its first, want %d", ns, name, got, n)
			}
			return false, fmt.Errorf("%d replicasets, want %d", len(rss.Items), n+1)
		}
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas ||
			d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
			return false, fmt.Errorf("rollout not finished: %+v", d.Status)
		}
		return true, nil
	})
}

// appliedChecksum reads the checksum recorded for one source on a workload.
func appliedChecksum(t *testing.T, ns, name, source string) string {
	t.Helper()
	w := getWorkload(t, deploymentsGVR, ns, name)
	applied := map[string]string{}
	if err := json.Unmarshal([]byte(w.annotations[appliedKey]), &applied); err != nil {
		t.Fatalf("applied checksums of %s/%s: %v", ns, name, err)
	}
	return applied[source]
}

// waitEvent waits for an Event with the given reason about the named object
// and returns its note.
func waitEvent(t *testing.T, ns, kind, name, reason string) string {
	t.Helper()
	var note string
	waitFor(t, fmt.Sprintf("%s event on %s %s/%s", reason, kind, ns, name), func() (bool, error) {
		list, err := env.kube.EventsV1().Events(ns).List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == kind && e.Regarding.Name == name {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note
}

// (a) helm upgrade, kubectl apply -f dir/: the source is updated and, tens of
// milliseconds later, the template of a workload reading it. The template
// change already rolls pods that start after the update: one rollout, no
// restart when the update's grace period ends.
func TestExactSourceUpdateThenTemplateChange(t *testing.T) {
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "release", map[string]string{"k": "0"})
	createDeployment(t, ns, "upgraded", podSpec(t, `volumes: [{name: v, configMap: {name: release}}]`), workloadOptions{optIn: true})
	createDeployment(t, ns, "witness", podSpec(t, `containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: release}}]}]`), workloadOptions{optIn: true})
	source := "configmap/" + ns + "/release"
	waitRecorded(t, deploymentsGVR, ns, "upgraded", source)
	waitRecorded(t, deploymentsGVR, ns, "witness", source)
	waitRollouts(t, ns, "upgraded", 0)

	start := time.Now()
	setConfigMapKey(t, ns, "release", "k", "1")
	updated := time.Now()
	editTemplate(t, ns, "upgraded", "2")
	t.Logf("template changed %v after the source update returned (update took %v)", time.Since(updated).Round(time.Millisecond), updated.Sub(start).Round(time.Millisecond))

	// The witness is restarted when the grace period ends: the update was
	// seen and its window processed.
	waitDeploymentRestarts(t, ns, "witness", 1)
	later.after(t)
	waitRollouts(t, ns, "upgraded", 1)
	if stamp := getWorkload(t, deploymentsGVR, ns, "upgraded").restartedAt; stamp != "" {
		t.Fatalf("upgraded was restarted by the controller at %s", stamp)
	}
	if got, want := appliedChecksum(t, ns, "upgraded", source), appliedChecksum(t, ns, "witness", source); got != want {
		t.Fatalf("upgraded records %q for the new data, the witness %q", got, want)
	}
	if hash := getWorkload(t, deploymentsGVR, ns, "upgraded").annotations[templateHashKey]; !strings.Contains(hash, "@") {
		t.Errorf("template record %q carries no template resourceVersion", hash)
	}
}

// (b) A source is updated and then a workload reading it is created: its pods
// start after the update, so it is never restarted.
func TestExactSourceUpdateThenNewWorkload(t *testing.T) {
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "shared", map[string]string{"k": "0"})
	spec := podSpec(t, `volumes: [{name: v, configMap: {name: shared}}]`)
	createDeployment(t, ns, "witness", spec, workloadOptions{optIn: true})
	source := "configmap/" + ns + "/shared"
	waitRecorded(t, deploymentsGVR, ns, "witness", source)

	setConfigMapKey(t, ns, "shared", "k", "1")
	createDeployment(t, ns, "newcomer", spec, workloadOptions{optIn: true})

	waitDeploymentRestarts(t, ns, "witness", 1)
	later.after(t)
	waitDeploymentRestarts(t, ns, "newcomer", 0)
	if got, want := appliedChecksum(t, ns, "newcomer", source), appliedChecksum(t, ns, "witness", source); got != want {
		t.Fatalf("newcomer records %q, the witness %q", got, want)
	}
}

// (c) The template changes and, a second later, the source: pods of the new
// template that started in between read the old data, so the update restarts
// them when its grace period ends: two rollouts.
func TestExactTemplateChangeThenSourceUpdate(t *testing.T) {
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "later", map[string]string{"k": "0"})
	createDeployment(t, ns, "edited", podSpec(t, `volumes: [{name: v, configMap: {name: later}}]`), workloadOptions{optIn: true})
	waitRecorded(t, deploymentsGVR, ns, "edited", "configmap/"+ns+"/later")
	waitRollouts(t, ns, "edited", 0)

	editTemplate(t, ns, "edited", "2")
	time.Sleep(time.Second)
	setConfigMapKey(t, ns, "later", "k", "1")

	waitRollouts(t, ns, "edited", 2)
	later.after(t)
	waitRollouts(t, ns, "edited", 2)
	if stamp := getWorkload(t, deploymentsGVR, ns, "edited").restartedAt; stamp == "" {
		t.Fatal("the second rollout is not the controller's restart")
	}
}

// (d) A key moved from data to binaryData with the same encoded bytes: the
// file the pod sees changes (text "AAEC" becomes the bytes 00 01 02), so the
// workload is restarted once.
func TestExactDataMovedToBinaryData(t *testing.T) {
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "moving", map[string]string{"k": "AAEC"})
	createDeployment(t, ns, "mover", podSpec(t, `volumes: [{name: v, configMap: {name: moving}}]`), workloadOptions{optIn: true})
	waitRecorded(t, deploymentsGVR, ns, "mover", "configmap/"+ns+"/moving")
	waitDeploymentRestarts(t, ns, "mover", 0)

	updateConfigMap(t, ns, "moving", func(cm *corev1.ConfigMap) {
		delete(cm.Data, "k")
		cm.BinaryData = map[string][]byte{"k": {0, 1, 2}}
	})
	waitDeploymentRestarts(t, ns, "mover", 1)
	later.after(t)
	waitDeploymentRestarts(t, ns, "mover", 1)
}

// (e) A paused Deployment and an OnDelete StatefulSet roll nothing when their
// template is patched. The controller still patches it (resuming, or deleting
// a pod, starts pods on the new data) and records the new checksums, and says
// on the workload that running pods keep the old data: a RestartNotRolled
// Warning Event.
func TestExactRestartNotRolled(t *testing.T) {
	t.Run("paused deployment", func(t *testing.T) {
		ns := newNamespace(t)
		later := newOrderingWitness(t, ns)
		createConfigMap(t, ns, "paused-config", map[string]string{"k": "0"})
		createDeployment(t, ns, "paused", podSpec(t, `volumes: [{name: v, configMap: {name: paused-config}}]`), workloadOptions{optIn: true})
		source := "configmap/" + ns + "/paused-config"
		before := waitRecorded(t, deploymentsGVR, ns, "paused", source)[source]
		waitRollouts(t, ns, "paused", 0)
		_, err := env.kube.AppsV1().Deployments(ns).Patch(ctxFor(t), "paused", types.MergePatchType,
			[]byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods := podNames(t, ns, "paused")

		setConfigMapKey(t, ns, "paused-config", "k", "1")
		note := waitEvent(t, ns, "Deployment", "paused", "RestartNotRolled")
		t.Logf("event: %s", note)
		if !strings.Contains(note, source) || !strings.Contains(note, "spec.paused") {
			t.Errorf("event note %q names neither the source nor the reason", note)
		}
		later.after(t)
		w := getWorkload(t, deploymentsGVR, ns, "paused")
		if w.restartedAt == "" {
			t.Fatal("the template of the paused deployment was not patched")
		}
		if w.replicaSets != 1 {
			t.Fatalf("paused deployment rolled: %d replicasets", w.replicaSets)
		}
		if after := appliedChecksum(t, ns, "paused", source); after == before {
			t.Fatalf("checksum %q not updated", after)
		}
		if now := podNames(t, ns, "paused"); now != pods {
			t.Fatalf("pods of the paused deployment changed: %s -> %s", pods, now)
		}

		// Resuming rolls the pending template once; the controller adds nothing.
		_, err = env.kube.AppsV1().Deployments(ns).Patch(ctxFor(t), "paused", types.MergePatchType,
			[]byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitDeploymentRestarts(t, ns, "paused", 1)
		later.after(t)
		waitDeploymentRestarts(t, ns, "paused", 1)
	})

	t.Run("OnDelete statefulset", func(t *testing.T) {
		ns := newNamespace(t)
		later := newOrderingWitness(t, ns)
		createConfigMap(t, ns, "sts-config", map[string]string{"k": "0"})
		replicas := int32(2)
		sts := &appsv1.StatefulSet{
			ObjectMeta: objectMeta("ondelete", workloadOptions{optIn: true}),
			Spec: appsv1.StatefulSetSpec{
				Replicas:       &replicas,
				ServiceName:    "ondelete",
				Selector:       &metav1.LabelSelector{MatchLabels: labelsFor("ondelete")},
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("ondelete")},
					Spec:       podSpec(t, `volumes: [{name: v, configMap: {name: sts-config}}]`),
				},
			},
		}
		if _, err := env.kube.AppsV1().StatefulSets(ns).Create(ctxFor(t), sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		source := "configmap/" + ns + "/sts-config"
		waitRecorded(t, statefulSetsGVR, ns, "ondelete", source)
		waitStatefulSetRolled(t, ns, "ondelete", 1)
		pods := podNames(t, ns, "ondelete")

		setConfigMapKey(t, ns, "sts-config", "k", "1")
		note := waitEvent(t, ns, "StatefulSet", "ondelete", "RestartNotRolled")
		t.Logf("event: %s", note)
		if !strings.Contains(note, source) || !strings.Contains(note, "OnDelete") {
			t.Errorf("event note %q names neither the source nor the reason", note)
		}
		later.after(t)
		s, err := env.kube.AppsV1().StatefulSets(ns).Get(ctxFor(t), "ondelete", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Spec.Template.Annotations[timestampKey] == "" || s.Generation != 2 {
			t.Fatalf("template not patched once: generation %d, annotations %v", s.Generation, s.Spec.Template.Annotations)
		}
		if now := podNames(t, ns, "ondelete"); now != pods {
			t.Fatalf("pods of the OnDelete statefulset changed: %s -> %s", pods, now)
		}
		if s.Status.UpdatedReplicas != 0 {
			t.Fatalf("%d pods updated, want none", s.Status.UpdatedReplicas)
		}
	})
}

// podNames lists the workload's live pods with their UIDs, sorted, as one
// string to compare: a rollout replaces pods, so it changes.
func podNames(t *testing.T, ns, app string) string {
	t.Helper()
	var out string
	waitFor(t, "pods of "+app, func() (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		var names []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name+"/"+string(p.UID))
			}
		}
		if len(names) == 0 {
			return false, fmt.Errorf("no pods")
		}
		slices.Sort(names)
		out = strings.Join(names, ",")
		return true, nil
	})
	return out
}
