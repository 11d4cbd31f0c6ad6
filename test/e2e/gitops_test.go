package e2e

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GitOps tools re-apply a workload's manifest as written in git, which knows
// nothing of the controller's annotations. Neither client-side apply (kubectl
// apply, Argo CD's default) nor server-side apply by another field manager
// (Flux, Argo CD with ServerSideApply) removes them or rolls the pods: the
// controller's writes carry their own field manager, restart-controller.
func TestGitOpsReapplyKeepsChecksumsAndRestartsNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	later := newOrderingWitness(t, ns)
	createConfigMap(t, ns, "app", map[string]string{"k": "1"})
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: `+ns+`
  labels: {app: web}
  annotations: {com.xing.deployment-restart: enabled}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}]}]
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

	apply() // created the way Argo CD does by default: client-side apply
	waitRecorded(t, deploymentsGVR, ns, "web", source)
	setConfigMapKey(t, ns, "app", "k", "2")
	waitDeploymentRestarts(t, ns, "web", 1)
	waitApplied(t, deploymentsGVR, ns, "web", map[string]string{source: currentChecksum(t, "configmap", ns, "app", nil)})
	before := getWorkload(t, deploymentsGVR, ns, "web")

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"client-side apply (kubectl, Argo CD)", nil},
		{"server-side apply by another field manager (Flux)", []string{"--server-side", "--field-manager", "flux-kustomize-controller", "--force-conflicts"}},
	} {
		apply(tc.args...)
		after := getWorkload(t, deploymentsGVR, ns, "web")
		for _, key := range []string{appliedKey, templateHashKey} {
			if after.annotations[key] != before.annotations[key] {
				t.Fatalf("%s: annotation %s changed from %q to %q", tc.name, key, before.annotations[key], after.annotations[key])
			}
		}
		if after.restartedAt != before.restartedAt {
			t.Fatalf("%s: the restart timestamp changed from %q to %q", tc.name, before.restartedAt, after.restartedAt)
		}
	}
	later.after(t)
	waitDeploymentRestarts(t, ns, "web", 1)

	d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	managers := map[string]bool{}
	for _, f := range d.ManagedFields {
		managers[f.Manager] = true
	}
	if !managers["restart-controller"] {
		t.Fatalf("no field manager restart-controller among %v", managers)
	}
}
