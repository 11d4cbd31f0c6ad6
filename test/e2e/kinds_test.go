package e2e

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func TestStatefulSetRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createConfigMap(t, ns, "db-config", map[string]string{"k": "0"})
	replicas := int32(2)
	opts := workloadOptions{optIn: true}
	sts := &appsv1.StatefulSet{
		ObjectMeta: objectMeta("db", opts),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: labelsFor("db")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("db")},
				Spec:       podSpec(t, `volumes: [{name: v, configMap: {name: db-config}}]`),
			},
		},
	}
	if _, err := env.kube.AppsV1().StatefulSets(ns).Create(ctxFor(t), sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRecorded(t, statefulSetsGVR, ns, "db", "configmap/"+ns+"/db-config")
	waitStatefulSetRolled(t, ns, "db", 1)

	setConfigMapKey(t, ns, "db-config", "k", "1")
	waitStatefulSetRolled(t, ns, "db", 2)
}

// waitStatefulSetRolled waits for the given generation (1 + restarts) to be
// fully rolled: every replica updated to the newest revision.
func waitStatefulSetRolled(t *testing.T, ns, name string, generation int64) {
	t.Helper()
	ctx := ctxFor(t)
	waitFor(t, fmt.Sprintf("statefulset %s/%s at generation %d rolled out", ns, name, generation), func() (bool, error) {
		s, err := env.kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if s.Generation > generation {
			t.Fatalf("statefulset %s/%s at generation %d, want %d: restarted too often", ns, name, s.Generation, generation)
		}
		st := s.Status
		if s.Generation != generation || st.ObservedGeneration != generation || st.UpdatedReplicas != *s.Spec.Replicas ||
			st.ReadyReplicas != *s.Spec.Replicas || st.CurrentRevision != st.UpdateRevision {
			return false, fmt.Errorf("generation %d, status %+v", s.Generation, st)
		}
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Labels[appsv1.StatefulSetRevisionLabel] != st.UpdateRevision {
				return false, fmt.Errorf("pod %s at revision %s", p.Name, p.Labels[appsv1.StatefulSetRevisionLabel])
			}
		}
		return len(pods.Items) == int(*s.Spec.Replicas), nil
	})
}

func TestDaemonSetRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createSecret(t, ns, "agent-token", map[string]string{"token": "0"})
	opts := workloadOptions{optIn: true}
	ds := &appsv1.DaemonSet{
		ObjectMeta: objectMeta("agent", opts),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("agent")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("agent")},
				Spec: podSpec(t, `
containers: [{name: agent, image: example/agent:1, env: [{name: T, valueFrom: {secretKeyRef: {name: agent-token, key: token}}}]}]`),
			},
		},
	}
	if _, err := env.kube.AppsV1().DaemonSets(ns).Create(ctxFor(t), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRecorded(t, daemonSetsGVR, ns, "agent", "secret/"+ns+"/agent-token")
	waitDaemonSetRolled(t, ns, "agent", 1)
	setSecretKey(t, ns, "agent-token", "token", "1")
	waitDaemonSetRolled(t, ns, "agent", 2)
}

func waitDaemonSetRolled(t *testing.T, ns, name string, generation int64) {
	t.Helper()
	ctx := ctxFor(t)
	waitFor(t, fmt.Sprintf("daemonset %s/%s at generation %d rolled out", ns, name, generation), func() (bool, error) {
		d, err := env.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Generation > generation {
			t.Fatalf("daemonset %s/%s at generation %d, want %d: restarted too often", ns, name, d.Generation, generation)
		}
		st := d.Status
		ok := d.Generation == generation && st.ObservedGeneration == generation && st.DesiredNumberScheduled > 0 &&
			st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled
		if !ok {
			return false, fmt.Errorf("generation %d, status %+v", d.Generation, st)
		}
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		want := d.Spec.Template.Annotations[timestampKey]
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Annotations[timestampKey] != want {
				return false, fmt.Errorf("pod %s from an older template", p.Name)
			}
		}
		return true, nil
	})
}

// rolloutCRD is a minimal stand-in for Argo Rollouts' CRD: the controller only
// needs the resource to be served with a pod template at spec.template.
const rolloutCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: rollouts.argoproj.io}
spec:
  group: argoproj.io
  scope: Namespaced
  names: {plural: rollouts, singular: rollout, kind: Rollout, listKind: RolloutList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

var rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// A kind enabled only through the config file (examples/config.yaml lists
// Argo Rollouts) whose CRD is installed while the controller runs is picked
// up without restarting the controller, and its workloads restart.
func TestCRDWorkloadInstalledLater(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(rolloutCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	// TestRolloutRestartAt may have installed it already.
	if _, err := env.dynamic.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		t.Fatalf("installing rollout CRD: %v", err)
	}
	ns := newNamespace(t)
	createConfigMap(t, ns, "canary-config", map[string]string{"k": "0"})
	rollout := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata": map[string]interface{}{
			"name":        "canary",
			"annotations": map[string]interface{}{optInKey: "enabled"},
		},
		"spec": map[string]interface{}{
			"replicas": int64(1),
			"template": map[string]interface{}{
				"spec": map[string]interface{}{
					"containers": []interface{}{map[string]interface{}{
						"name": "app", "image": "example/app:1",
						"envFrom": []interface{}{map[string]interface{}{"configMapRef": map[string]interface{}{"name": "canary-config"}}},
					}},
				},
			},
		},
	}}
	// The CRD may take a moment to be served after its creation.
	waitFor(t, "rollout created", func() (bool, error) {
		_, err := env.dynamic.Resource(rolloutsGVR).Namespace(ns).Create(ctx, rollout, metav1.CreateOptions{})
		return err == nil, err
	})
	waitRecorded(t, rolloutsGVR, ns, "canary", "configmap/"+ns+"/canary-config")
	before := getWorkload(t, rolloutsGVR, ns, "canary")
	if before.restartedAt != "" {
		t.Fatalf("new rollout restarted at once: %+v", before)
	}
	setConfigMapKey(t, ns, "canary-config", "k", "1")
	waitFor(t, "rollout restarted", func() (bool, error) {
		now := getWorkload(t, rolloutsGVR, ns, "canary")
		if now.generation > before.generation+1 {
			t.Fatalf("rollout restarted more than once: generation %d -> %d", before.generation, now.generation)
		}
		return now.generation == before.generation+1 && now.restartedAt != "", nil
	})
}
