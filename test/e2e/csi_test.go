package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

var spcpsGVR = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasspodstatuses"}

// csiOptIn opts workloads in for TestCSI's controller alone.
const csiOptIn = "e2e.restart-controller.test/csi"

// csiConfig is examples/config.yaml's CSI source kind and reference (there
// commented out), with ConfigMaps for the witness, in namespace ns.
func csiConfig(t *testing.T, ns string) string {
	source, reference := testfixture.CSIKind(t)
	return "annotations: {optIn: " + csiOptIn + "}\nnamespaces: [" + ns + "]\n" +
		"sources:\n- {name: configmap, version: v1, resource: configmaps, dataFields: [data, binaryData]}\n" + source +
		"references:\n- {source: configmap, from: [\"volumes[*].configMap\"], name: name}\n" + reference
}

// installSPCPSCRD installs the CSI driver's SecretProviderClassPodStatus CRD
// (testdata/csi) and waits until its resource is served.
func installSPCPSCRD(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "csi", "secretproviderclasspodstatuses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := env.dynamic.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		t.Fatalf("installing the SecretProviderClassPodStatus CRD: %v", err)
	}
	waitFor(t, "SecretProviderClassPodStatuses served", func() (bool, error) {
		_, err := env.dynamic.Resource(spcpsGVR).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	})
}

// csiDriver plays the CSI Secrets Store driver's part for one
// SecretProviderClass: a status object per pod, created with the versions
// it mounted, updated when they rotate (pkg/secrets-store/utils.go names
// them POD-NAMESPACE-SPC).
type csiDriver struct {
	ns, spc string
}

func (d csiDriver) name(pod string) string { return pod + "-" + d.ns + "-" + d.spc }

func (d csiDriver) status(pod, version string) map[string]interface{} {
	return map[string]interface{}{
		"podName": pod, "secretProviderClassName": d.spc, "mounted": true,
		"targetPath": "/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/secrets/mount",
		"objects":    []interface{}{map[string]interface{}{"id": "secret/db-password", "version": version}},
	}
}

func (d csiDriver) mount(t *testing.T, pod, version string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
		"metadata": map[string]interface{}{"name": d.name(pod), "labels": map[string]interface{}{"secrets-store.csi.k8s.io/node-name": "kwok-node"}},
		"status":   d.status(pod, version),
	}}
	if _, err := env.dynamic.Resource(spcpsGVR).Namespace(d.ns).Create(ctxFor(t), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the status of pod %s: %v", pod, err)
	}
}

func (d csiDriver) rotate(t *testing.T, pod, version string) {
	t.Helper()
	ctx := ctxFor(t)
	u, err := env.dynamic.Resource(spcpsGVR).Namespace(d.ns).Get(ctx, d.name(pod), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = d.status(pod, version)
	if _, err := env.dynamic.Resource(spcpsGVR).Namespace(d.ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("rotating the status of pod %s: %v", pod, err)
	}
}

func (d csiDriver) unmount(t *testing.T, pod string) {
	t.Helper()
	if err := env.dynamic.Resource(spcpsGVR).Namespace(d.ns).Delete(ctxFor(t), d.name(pod), metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the status of pod %s: %v", pod, err)
	}
}

// podsOf waits until the deployment's pods are n, all of its current
// ReplicaSet, and returns their names.
func podsOf(t *testing.T, ns, name string, n int) []string {
	t.Helper()
	var names []string
	waitFor(t, fmt.Sprintf("%d pods of %s/%s", n, ns, name), func() (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		names = nil
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		if len(names) != n || len(pods.Items) != n {
			return false, fmt.Errorf("pods %v of %d", names, len(pods.Items))
		}
		return true, nil
	})
	return names
}

// scaleUp adds a pod to the deployment and returns its name.
func scaleUp(t *testing.T, ns, name string, pods []string) string {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, len(pods)+1)
	if _, err := env.kube.AppsV1().Deployments(ns).Patch(ctxFor(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling %s/%s: %v", ns, name, err)
	}
	for _, pod := range podsOf(t, ns, name, len(pods)+1) {
		if !slices.Contains(pods, pod) {
			return pod
		}
	}
	t.Fatalf("no new pod of %s/%s", ns, name)
	return ""
}

// explainCSI runs explain on TestCSI's Deployment and checks what it says
// of its SecretProviderClass and what the controller would do.
func explainCSI(t *testing.T, config, ns, status, action string) {
	t.Helper()
	r := runCLI(t, "explain", "--kubeconfig", env.cluster.Kubeconfig, "--config", config, "-n", ns, "deploy/web", "-o", "json")
	if r.code != 0 {
		t.Fatalf("explain: exit status %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var report explain.WorkloadReport
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, r.stdout)
	}
	if len(report.Sources) != 1 || report.Sources[0].Status != status || report.Decision.Action != action {
		t.Fatalf("explain: sources %+v, decision %+v; want %s, %s", report.Sources, report.Decision, status, action)
	}
}

// TestCSI: a Deployment of two pods mounting a SecretProviderClass through
// the CSI driver, whose SecretProviderClassPodStatuses are written here as
// the driver would. Their creation and deletion never restart it, not even
// the status of a scale-up's pod that mounted a version rotated at the
// provider before the older pods' rotation; one pod's rotation restarts it
// once; the other pod's rotation to the same version after that restarts
// nothing, nor do the status objects of the restart's new pods and the
// deletion of the old ones.
func TestCSI(t *testing.T) {
	t.Parallel()
	installSPCPSCRD(t)
	ns := newNamespace(t)
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(csiConfig(t, ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := env.startController(ctxFor(t), "csi-"+ns, file, "--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	optIn := map[string]string{csiOptIn: "enabled"}
	witness := newPresetWitness(t, ns, optIn)

	replicas := int32(2)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labelsFor("web"), Annotations: optIn},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("web")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("web")}, Spec: podSpec(t, `
volumes: [{name: secrets, csi: {driver: secrets-store.csi.k8s.io, readOnly: true, volumeAttributes: {secretProviderClass: vault}}}]`)},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	driver := csiDriver{ns: ns, spc: "vault"}
	id := sourceID("secretproviderclasspodstatus", ns, "vault")
	old := podsOf(t, ns, "web", 2)
	// Rolled out and recorded (no status object yet: nothing for it), so
	// that nothing but the status objects brings the workload back.
	waitDeploymentRestarts(t, ns, "web", 0)
	if applied := waitRecorded(t, deploymentsGVR, ns, "web"); len(applied) != 0 {
		t.Fatalf("recorded %v before any pod mounted the volume", applied)
	}

	// The pods mount the volume: the driver creates their status objects.
	// The first fills the record; neither restarts.
	driver.mount(t, old[0], "v1")
	driver.mount(t, old[1], "v1")
	v1 := waitRecorded(t, deploymentsGVR, ns, "web", id)[id]
	witness.after(t)
	waitDeploymentRestarts(t, ns, "web", 0)

	// The object rotates at the provider; the pod of a scale-up mounts the
	// new version before the older pods' rotation: nothing yet.
	scaled := scaleUp(t, ns, "web", old)
	driver.mount(t, scaled, "v2")
	witness.after(t)
	waitDeploymentRestarts(t, ns, "web", 0)
	// explain sees it as the controller does: a baseline, nothing to do.
	explainCSI(t, file, ns, explain.StatusBaseline, explain.ActionNothing)

	// One pod's mounted object rotates: one restart, after the grace period.
	driver.rotate(t, old[0], "v2")
	waitDeploymentRestarts(t, ns, "web", 1)
	v2 := waitRecorded(t, deploymentsGVR, ns, "web", id)[id]
	explainCSI(t, file, ns, explain.StatusUpToDate, explain.ActionNothing)
	if v2 == v1 {
		t.Fatalf("the rotation's restart recorded %q, the version before", v2)
	}

	// The other pod rotates to the same version after the restart.
	driver.rotate(t, old[1], "v2")
	witness.after(t)
	waitDeploymentRestarts(t, ns, "web", 1)

	// The restart's pods mount the new version; the old pods' status
	// objects go with them.
	for _, pod := range podsOf(t, ns, "web", 3) {
		driver.mount(t, pod, "v2")
	}
	driver.unmount(t, old[0])
	driver.unmount(t, old[1])
	driver.unmount(t, scaled)
	witness.after(t)
	waitDeploymentRestarts(t, ns, "web", 1)
	if got := waitRecorded(t, deploymentsGVR, ns, "web", id)[id]; got != v2 {
		t.Fatalf("recorded %q after the old pods went, want %q still", got, v2)
	}
}
