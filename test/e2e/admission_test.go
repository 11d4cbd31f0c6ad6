package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

const (
	admissionPolicy = "restart-controller-own-annotations-only"
	hashKey         = "com.xing.deployment-restart.applied-template-hash"
)

var cronJobsGVR = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}

// The admission guard of manifests/admission lets the controller's
// ServiceAccount change its three annotations and nothing else: every other
// patch it sends is denied (a compromised controller cannot change an image),
// the patches the controller itself sends pass, and nobody else is affected.
func TestAdmissionGuard(t *testing.T) {
	objects := render(t, filepath.Join(env.repoRoot, "manifests"))
	applyServerSide(t, "admission-rbac", kindsOf(objects, rbacKinds...))
	applyServerSide(t, "admission-policy", render(t, filepath.Join(env.repoRoot, "manifests", "admission")))
	ctx := ctxFor(t)

	// CronJobs are in the shipped ClusterRole (restarted by runNow): the
	// policy, not RBAC, is what answers for them too.
	kubeconfig, rc := serviceAccountKubeconfig(t, manifestsNamespace, controllerSA)
	asController, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	optIn := "admission.e2e.example/restart"
	createConfigMap(t, ns, "app", map[string]string{"k": "0"})
	createReader(t, "Deployment", ns, "web", optIn, "app")
	createProbes(t, ns, optIn)

	patch := func(gvr schema.GroupVersionResource, name, body string) error {
		_, err := asController.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	// Policies reach the API server's admission a moment after they are
	// created. Each try changes something (a patch that changes nothing
	// passes any policy), and is allowed until the policy is enforced.
	tries := 0
	waitFor(t, "the policy to be enforced", func() (bool, error) {
		tries++
		err := patch(deploymentsGVR, "probe", fmt.Sprintf(`{"metadata":{"annotations":{"e2e.example/try":"%d"}}}`, tries))
		if deniedByPolicy(err) {
			return true, nil
		}
		return false, err
	})

	denied := []struct {
		what, resource, body string
	}{
		{"container image", "deployment", `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"evil/app:1"}]}}}}`},
		{"container command", "deployment", `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"example/app:1","command":["sh","-c","curl evil"]}]}}}}`},
		{"replicas", "deployment", `{"spec":{"replicas":5}}`},
		{"another annotation", "deployment", `{"metadata":{"annotations":{"team":"payments"}}}`},
		{"the opt-in annotation", "deployment", `{"metadata":{"annotations":{"` + optIn + `":null}}}`},
		{"a label", "deployment", `{"metadata":{"labels":{"app":"hijacked"}}}`},
		{"a finalizer", "deployment", `{"metadata":{"finalizers":["example.com/hold"]}}`},
		{"a pod template label", "deployment", `{"spec":{"template":{"metadata":{"labels":{"extra":"x"}}}}}`},
		{"another pod template annotation", "deployment", `{"spec":{"template":{"metadata":{"annotations":{"sidecar.example/inject":"true"}}}}}`},
		{"own annotations along with an image", "deployment", `{"metadata":{"annotations":{"` + appliedKey + `":"{}"}},` +
			`"spec":{"template":{"metadata":{"annotations":{"` + timestampKey + `":"2030-01-01T00:00:00Z"}},"spec":{"containers":[{"name":"app","image":"evil/app:1"}]}}}}`},
		{"a CronJob's schedule", "cronjob", `{"spec":{"schedule":"* * * * *"}}`},
		{"a CronJob's job image", "cronjob", `{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"job","image":"evil/job:1"}]}}}}}}`},
	}
	for _, c := range denied {
		gvr := deploymentsGVR
		if c.resource == "cronjob" {
			gvr = cronJobsGVR
		}
		err := patch(gvr, "probe", c.body)
		if !deniedByPolicy(err) {
			t.Errorf("patching %s as the controller's ServiceAccount: %v, want a denial by %s", c.what, err, admissionPolicy)
		} else {
			t.Logf("denied, %s: %v", c.what, err)
		}
	}

	// The controller's own patches: the shape strategy.BuildPatch writes.
	stamp := time.Now().UTC().Format(time.RFC3339Nano)
	allowed := []struct {
		what, resource, body string
	}{
		{"record checksums", "deployment", fmt.Sprintf(`{"metadata":{"annotations":{%q:"{\"configmap/%s/app\":\"x\"}",%q:"h1"}}}`, appliedKey, ns, hashKey)},
		{"restart", "deployment", fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}",%q:"h2"}},"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
			appliedKey, hashKey, timestampKey, stamp)},
		{"record a rollout and a hold", "deployment", fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}",%q:"{}"}}}`,
			"com.xing.deployment-restart.rollout", "com.xing.deployment-restart.hold")},
		{"restart a CronJob's future Jobs", "cronjob", fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}},"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}}}`,
			appliedKey, timestampKey, stamp)},
	}
	for _, c := range allowed {
		gvr := deploymentsGVR
		if c.resource == "cronjob" {
			gvr = cronJobsGVR
		}
		if err := patch(gvr, "probe", c.body); err != nil {
			t.Errorf("patching to %s as the controller's ServiceAccount: %v, want it allowed", c.what, err)
		}
	}
	d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "example/app:1" || d.Spec.Template.Annotations[timestampKey] != stamp {
		t.Fatalf("probe after the patches: image %q, timestamp %q", d.Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Annotations[timestampKey])
	}
	// The policy binds the ServiceAccount only: the suite's admin still may.
	if _, err := env.dynamic.Resource(deploymentsGVR).Namespace(ns).Patch(ctx, "probe", types.MergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"example/app:2"}]}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("an administrator's image change was refused: %v", err)
	}

	// The controller itself, as that ServiceAccount, under the policy.
	p, err := env.startControllerAs(ctx, controllerRun{
		name: "admission", kubeconfig: kubeconfig, env: podEnv("restart-controller-e2e-admission"),
		configFile: rbacConfig(t, "admission", optIn, "", ns),
		args:       []string{"--restart-grace-period", restartGraceRBAC},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	waitRecorded(t, deploymentsGVR, ns, "web", "configmap/"+ns+"/app")
	setConfigMapKey(t, ns, "app", "k", "1")
	waitDeploymentRestarts(t, ns, "web", 1)
	if v := p.failedReconciles(t); v != 0 {
		t.Fatalf("%v reconcile errors under the admission policy:\n%s", v, p.LogTail(40))
	}
	if p.logContains(admissionPolicy) {
		t.Fatalf("the policy denied one of the controller's patches:\n%s", p.LogTail(40))
	}
	stopCleanly(t, p)
}

// deniedByPolicy reports whether err is the guard's denial.
func deniedByPolicy(err error) bool {
	return err != nil && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), admissionPolicy)
}

// createProbes creates a Deployment and a suspended CronJob named "probe",
// opted in (for realism: the controller does not run while they are patched
// by hand) and without pods, whose objects the test patches.
func createProbes(t *testing.T, ns, optIn string) {
	t.Helper()
	meta := metav1.ObjectMeta{Name: "probe", Labels: labelsFor("probe"), Annotations: map[string]string{optIn: "enabled"}}
	zero := int32(0)
	d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: &zero,
		Selector: &metav1.LabelSelector{MatchLabels: labelsFor("probe")},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("probe")},
			Spec:       podSpec(t, `containers: [{name: app, image: example/app:1}]`),
		},
	}}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/probe: %v", ns, err)
	}
	suspend := true
	cj := &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{
		Schedule: "0 0 1 1 *",
		Suspend:  &suspend,
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: podSpec(t, "containers: [{name: job, image: example/job:1}]\nrestartPolicy: Never"),
		}}},
	}}
	if _, err := env.kube.BatchV1().CronJobs(ns).Create(ctxFor(t), cj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating cronjob %s/probe: %v", ns, err)
	}
}
