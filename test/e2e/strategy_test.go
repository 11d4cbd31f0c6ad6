package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// quietFor is how long a test watches for a write that must not come: well
// beyond the suite's grace period and the controller's check period.
const quietFor = 3 * 2 * time.Second

// installRolloutCRD installs the stand-in of Argo Rollouts' CRD, once for
// every test that needs it, and waits until Rollouts are served.
func installRolloutCRD(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(rolloutCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := env.dynamic.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("installing rollout CRD: %v", err)
	}
}

// An Argo Rollout annotated com.xing.deployment-restart.strategy: restart
// (Reloader's rollout-strategy: restart) is restarted by spec.restartAt,
// once per change, and its pod template is never touched: Argo CD sees no
// drift, no canary analysis starts. A source update that changes no data
// writes nothing.
func TestRolloutRestartAt(t *testing.T) {
	t.Parallel()
	installRolloutCRD(t)
	ctx := ctxFor(t)
	ns := newNamespace(t)
	createConfigMap(t, ns, "canary-config", map[string]string{"k": "0"})
	rollout := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata": map[string]interface{}{
			"name":        "canary",
			"annotations": map[string]interface{}{optInKey: "enabled", "com.xing.deployment-restart.strategy": "restart"},
		},
		"spec": map[string]interface{}{
			"replicas": int64(1),
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "canary"}},
				"spec": map[string]interface{}{
					"containers": []interface{}{map[string]interface{}{
						"name": "app", "image": "example/app:1",
						"envFrom": []interface{}{map[string]interface{}{"configMapRef": map[string]interface{}{"name": "canary-config"}}},
					}},
				},
			},
		},
	}}
	waitFor(t, "rollout created", func() (bool, error) {
		_, err := env.dynamic.Resource(rolloutsGVR).Namespace(ns).Create(ctx, rollout, metav1.CreateOptions{})
		return err == nil, nil
	})
	waitRecorded(t, rolloutsGVR, ns, "canary", "configmap/"+ns+"/canary-config")

	read := func() (template, restartAt string) {
		u, err := env.dynamic.Resource(rolloutsGVR).Namespace(ns).Get(ctx, "canary", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := json.Marshal(u.Object["spec"].(map[string]interface{})["template"])
		if err != nil {
			t.Fatal(err)
		}
		at, _, _ := unstructured.NestedString(u.Object, "spec", "restartAt")
		return string(tmpl), at
	}
	template, at := read()
	if at != "" {
		t.Fatalf("restartAt %q before any change", at)
	}
	// Counts every value restartAt takes, and every template seen.
	seen := map[string]bool{}
	templates := map[string]bool{template: true}
	watchFor := func(d time.Duration) {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			tmpl, at := read()
			templates[tmpl] = true
			if at != "" {
				seen[at] = true
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	setConfigMapKey(t, ns, "canary-config", "k", "1")
	waitFor(t, "spec.restartAt set", func() (bool, error) {
		_, at := read()
		return at != "", nil
	})
	watchFor(quietFor)
	if len(seen) != 1 {
		t.Fatalf("restartAt took %d values for one change: %v", len(seen), seen)
	}
	// A metadata-only update of the source: no data changed, nothing written.
	updateConfigMap(t, ns, "canary-config", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"touched": "yes"} })
	watchFor(quietFor)
	if len(seen) != 1 {
		t.Fatalf("restartAt changed without a data change: %v", seen)
	}
	setConfigMapKey(t, ns, "canary-config", "k", "2")
	waitFor(t, "spec.restartAt set again", func() (bool, error) {
		_, at := read()
		return !seen[at], nil
	})
	watchFor(quietFor)
	if len(seen) != 2 {
		t.Fatalf("restartAt took %d values for two changes: %v", len(seen), seen)
	}
	if len(templates) != 1 {
		t.Fatalf("the pod template changed %d times, want never", len(templates)-1)
	}
}

// jobsOf lists the Jobs the CronJob owns.
func jobsOf(t *testing.T, ns string, owner types.UID) []batchv1.Job {
	t.Helper()
	list, err := env.kube.BatchV1().Jobs(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == owner {
			out = append(out, j)
		}
	}
	return out
}

// A CronJob (runNow, the default) gets exactly one Job per change, owned by
// it and marked as started by hand, its Job template untouched; a source
// update that changes no data starts none.
func TestCronJobRunNow(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	ns := newNamespace(t)
	createConfigMap(t, ns, "report-config", map[string]string{"k": "0"})
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "report", Annotations: map[string]string{optInKey: "enabled"}},
		Spec: batchv1.CronJobSpec{
			// Once a year: no scheduled run during the test.
			Schedule: "0 0 1 1 *",
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "books"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
					Spec: podSpec(t, `
restartPolicy: Never
containers:
- name: job
  image: example/report:1
  envFrom: [{configMapRef: {name: report-config}}]
`)}}},
		},
	}
	created, err := env.kube.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cronjobsGVR := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}
	waitRecorded(t, cronjobsGVR, ns, "report", "configmap/"+ns+"/report-config")
	if jobs := jobsOf(t, ns, created.UID); len(jobs) != 0 {
		t.Fatalf("%d Jobs on first sight, want none", len(jobs))
	}
	exactly := func(n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d Jobs of the CronJob", n), func() (bool, error) {
			jobs := jobsOf(t, ns, created.UID)
			if len(jobs) > n {
				return false, fmt.Errorf("%d Jobs, want %d", len(jobs), n)
			}
			return len(jobs) == n, nil
		})
		time.Sleep(quietFor)
		if jobs := jobsOf(t, ns, created.UID); len(jobs) != n {
			t.Fatalf("%d Jobs, want %d", len(jobs), n)
		}
	}

	setConfigMapKey(t, ns, "report-config", "k", "1")
	exactly(1)
	job := jobsOf(t, ns, created.UID)[0]
	if job.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" || job.Labels["team"] != "books" {
		t.Errorf("Job %s: annotations %v, labels %v", job.Name, job.Annotations, job.Labels)
	}
	updateConfigMap(t, ns, "report-config", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"touched": "yes"} })
	exactly(1)
	setConfigMapKey(t, ns, "report-config", "k", "2")
	exactly(2)
	now, err := env.kube.BatchV1().CronJobs(ns).Get(ctx, "report", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.Spec.JobTemplate.Spec.Template.Annotations[timestampKey] != "" {
		t.Error("the CronJob's Job template was patched")
	}
}

// A Job of a kind configured with recreate is deleted and created again
// once for a change (a new UID, the same name), and not again after.
func TestJobRecreate(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	ns := newNamespace(t)
	keys := keysFor("recreate")
	configFile := isolatedConfig(t, "recreate", ns, keys, func(cfg map[string]interface{}) {
		cfg["workloads"] = []interface{}{map[string]interface{}{
			"group": "batch", "version": "v1", "resource": "jobs", "podTemplatePath": "spec.template",
			"rollout": map[string]interface{}{"status": "job"},
			"restart": map[string]interface{}{"strategy": "recreate", "clearFields": []interface{}{"spec.selector"},
				"clearTemplateLabels": []interface{}{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"}},
		}}
	})
	p, err := env.startController(ctx, "recreate", configFile, "--restart-grace-period", "1s", "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	logTailOnFailure(t, "recreate", &p)
	t.Cleanup(p.Stop)

	createConfigMap(t, ns, "migrate-config", map[string]string{"k": "0"})
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Annotations: map[string]string{keys.optIn: "enabled"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec(t, `
restartPolicy: Never
containers:
- name: job
  image: example/migrate:1
  envFrom: [{configMapRef: {name: migrate-config}}]
`)}},
	}
	first, err := env.kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func() *batchv1.Job {
		j, err := env.kube.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // between the deletion and the creation
		}
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	waitFor(t, "checksums recorded on the Job", func() (bool, error) {
		j := get()
		return j != nil && j.Annotations[keys.applied] != "", nil
	})
	uids := map[types.UID]bool{first.UID: true}
	watchUIDs := func(d time.Duration) {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			if j := get(); j != nil {
				uids[j.UID] = true
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	watchUIDs(quietFor)
	if len(uids) != 1 {
		t.Fatalf("recreated %d times without a change", len(uids)-1)
	}
	setConfigMapKey(t, ns, "migrate-config", "k", "1")
	waitFor(t, "the Job recreated", func() (bool, error) {
		j := get()
		return j != nil && j.UID != first.UID && j.Annotations[keys.applied] != "", nil
	})
	watchUIDs(quietFor)
	if len(uids) != 2 {
		t.Fatalf("recreated %d times for one change, want once", len(uids)-1)
	}
	now := get()
	var applied map[string]string
	if err := json.Unmarshal([]byte(now.Annotations[keys.applied]), &applied); err != nil {
		t.Fatal(err)
	}
	want, err := configMapChecksum(mustConfigMap(t, ns, "migrate-config"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := applied["configmap/"+ns+"/migrate-config"]; got != want {
		t.Errorf("recorded %s, want the current data's %s", got, want)
	}
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func mustConfigMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
