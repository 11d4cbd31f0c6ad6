package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/testcluster"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

// installDeploymentConfigCRD installs the CRD, once for every test that
// needs it, and waits until DeploymentConfigs are served.
func installDeploymentConfigCRD(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(testcluster.DeploymentConfigCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := env.dynamic.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		t.Fatalf("installing the DeploymentConfig CRD: %v", err)
	}
	waitFor(t, "DeploymentConfigs served", func() (bool, error) {
		_, err := env.dynamic.Resource(testcluster.DeploymentConfigs).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// TestDeploymentConfigs: the DeploymentConfig kind examples/config.yaml
// shows, configured. A change of the ConfigMap a DeploymentConfig reads
// changes its pod template once; when its status says the new replication
// controller is available, as OpenShift's controller writes it, the rollout
// is complete (a RolloutComplete Event). One without a ConfigChange trigger
// gets the new template too (its next rollout reads the new data) and a
// RestartNotRolled Warning Event: its pods keep the old data.
func TestDeploymentConfigs(t *testing.T) {
	t.Parallel()
	installDeploymentConfigCRD(t)
	ns := newNamespace(t)
	keys := keysFor("dc")
	file := isolatedConfig(t, "dc-"+ns, ns, keys, func(cfg map[string]interface{}) {
		var kind []interface{}
		if err := yaml.Unmarshal([]byte(testfixture.DeploymentConfigKind(t)), &kind); err != nil {
			t.Fatal(err)
		}
		cfg["workloads"] = append(cfg["workloads"].([]interface{}), kind...)
	})
	p, err := env.startController(ctxFor(t), "dc-"+ns, file, "--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	logTailOnFailure(t, "dc", &p)
	t.Cleanup(p.Stop)

	createConfigMap(t, ns, "dc-config", map[string]string{"k": "0"})
	create := func(name string, triggers []interface{}) {
		dc := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
			"metadata": map[string]interface{}{"name": name, "annotations": map[string]interface{}{keys.optIn: "enabled"}},
			"spec": map[string]interface{}{
				"replicas": int64(1), "selector": map[string]interface{}{"app": name}, "triggers": triggers,
				"template": map[string]interface{}{
					"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": name}},
					"spec": map[string]interface{}{"containers": []interface{}{map[string]interface{}{
						"name": "app", "image": "example/app:1",
						"envFrom": []interface{}{map[string]interface{}{"configMapRef": map[string]interface{}{"name": "dc-config"}}},
					}}},
				},
			},
		}}
		if _, err := env.dynamic.Resource(testcluster.DeploymentConfigs).Namespace(ns).Create(ctxFor(t), dc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		settleDeploymentConfig(t, ns, name)
	}
	create("auto", []interface{}{map[string]interface{}{"type": "ConfigChange"}})
	create("manual", []interface{}{map[string]interface{}{"type": "ImageChange", "imageChangeParams": map[string]interface{}{
		"automatic": true, "containerNames": []interface{}{"app"}, "from": map[string]interface{}{"kind": "ImageStreamTag", "name": "app:latest"}}}})
	source := sourceID("configmap", ns, "dc-config")
	for _, name := range []string{"auto", "manual"} {
		waitDeploymentConfigRecorded(t, keys.applied, ns, name, source)
	}
	templates := map[string]map[string]bool{"auto": {}, "manual": {}}
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
			for name := range templates {
				templates[name][deploymentConfigTemplate(t, ns, name)] = true
			}
			if !time.Now().Before(end) {
				return
			}
		}
	}
	watch(0)

	setConfigMapKey(t, ns, "dc-config", "k", "1")
	waitFor(t, "both pod templates changed", func() (bool, error) {
		watch(0)
		return len(templates["auto"]) == 2 && len(templates["manual"]) == 2, nil
	})
	waitEvent(t, ns, "DeploymentConfig", "manual", "RestartNotRolled")
	// OpenShift's controller rolls the one with a ConfigChange trigger out.
	settleDeploymentConfig(t, ns, "auto")
	waitEvent(t, ns, "DeploymentConfig", "auto", "RolloutComplete")
	watch(quietFor)
	for name, seen := range templates {
		if len(seen) != 2 {
			t.Errorf("%s: %d pod templates, want 2 (one restart)", name, len(seen))
		}
	}
}

// settleDeploymentConfig writes the status OpenShift's DeploymentConfig
// controller writes once the replication controller of the
// DeploymentConfig's latest template is available: the generation
// observed, the next version, every replica updated and available,
// Progressing for NewReplicationControllerAvailable. It reads the object
// afresh on a conflict: the restart controller writes its records too.
func settleDeploymentConfig(t *testing.T, ns, name string) {
	t.Helper()
	res := env.dynamic.Resource(testcluster.DeploymentConfigs).Namespace(ns)
	waitFor(t, fmt.Sprintf("status of deploymentconfig %s/%s written", ns, name), func() (bool, error) {
		dc, err := res.Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		version, _, _ := unstructured.NestedInt64(dc.Object, "status", "latestVersion")
		replicas, _, _ := unstructured.NestedInt64(dc.Object, "spec", "replicas")
		dc.Object["status"] = map[string]interface{}{
			"observedGeneration": dc.GetGeneration(), "latestVersion": version + 1,
			"replicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas, "readyReplicas": replicas,
			"conditions": []interface{}{
				map[string]interface{}{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
				map[string]interface{}{"type": "Progressing", "status": "True", "reason": "NewReplicationControllerAvailable",
					"message": fmt.Sprintf("replication controller \"%s-%d\" successfully rolled out", name, version+1)},
			},
		}
		_, err = res.UpdateStatus(ctxFor(t), dc, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func deploymentConfigTemplate(t *testing.T, ns, name string) string {
	t.Helper()
	dc, err := env.dynamic.Resource(testcluster.DeploymentConfigs).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(dc.Object["spec"].(map[string]interface{})["template"])
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// waitDeploymentConfigRecorded waits until the DeploymentConfig's applied
// checksums, under the annotation key, name the source.
func waitDeploymentConfigRecorded(t *testing.T, key, ns, name, source string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("applied checksums on deploymentconfig %s/%s", ns, name), func() (bool, error) {
		dc, err := env.dynamic.Resource(testcluster.DeploymentConfigs).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		applied := map[string]string{}
		if raw, ok := dc.GetAnnotations()[key]; !ok || json.Unmarshal([]byte(raw), &applied) != nil {
			return false, nil
		}
		_, ok := applied[source]
		return ok, nil
	})
}
