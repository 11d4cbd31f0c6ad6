package main

import (
	"context"
	"fmt"
	"time"

	"github.com/restart-controller/restart-controller/internal/testcluster"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// openshiftStandIn installs the DeploymentConfig CRD and, until ctx ends,
// plays the part of OpenShift's DeploymentConfig controller that the suites
// observe (utils.DeploymentConfigIsReady: every replica ready): each
// DeploymentConfig's status observes its generation, and a new generation
// of one with a ConfigChange trigger is rolled out at once, a new
// latestVersion with every replica updated, ready and available, as the
// controller reports it once its replication controller is. It creates no
// replication controller and no pod: what the suites check (the pod
// template's annotation, or STAKATER_ variables) is written by the restart
// controller alone.
func openshiftStandIn(ctx context.Context, kubeconfig string) error {
	client, err := installCRD(ctx, kubeconfig, testcluster.DeploymentConfigCRD, testcluster.DeploymentConfigs)
	if err != nil {
		return err
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) { settleDeploymentConfigs(ctx, client) }, 300*time.Millisecond)
	return nil
}

// settleDeploymentConfigs writes the rolled-out status of every
// DeploymentConfig whose status does not observe its generation yet.
func settleDeploymentConfigs(ctx context.Context, client dynamic.Interface) {
	list, err := client.Resource(testcluster.DeploymentConfigs).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range list.Items {
		dc := &list.Items[i]
		if observed, found, _ := unstructured.NestedInt64(dc.Object, "status", "observedGeneration"); found && observed == dc.GetGeneration() {
			continue
		}
		dc.Object["status"] = rolledOut(dc)
		// A conflict or a deletion is settled on the next round.
		_, _ = client.Resource(testcluster.DeploymentConfigs).Namespace(dc.GetNamespace()).UpdateStatus(ctx, dc, metav1.UpdateOptions{})
	}
}

// rolledOut is the status OpenShift's controller writes for dc once it has
// observed its generation: with a ConfigChange trigger (or before its
// first rollout) the template of that generation rolled out as the next
// version, its replication controller available; without one the version
// stays (a template change waits for `oc rollout latest`).
func rolledOut(dc *unstructured.Unstructured) map[string]interface{} {
	replicas, _, _ := unstructured.NestedInt64(dc.Object, "spec", "replicas")
	version, _, _ := unstructured.NestedInt64(dc.Object, "status", "latestVersion")
	if version == 0 || hasConfigChange(dc) {
		version++
	}
	return map[string]interface{}{
		"observedGeneration": dc.GetGeneration(),
		"latestVersion":      version,
		"replicas":           replicas,
		"updatedReplicas":    replicas,
		"readyReplicas":      replicas,
		"availableReplicas":  replicas,
		"conditions": []interface{}{
			map[string]interface{}{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
			map[string]interface{}{"type": "Progressing", "status": "True", "reason": "NewReplicationControllerAvailable",
				"message": fmt.Sprintf("replication controller %q successfully rolled out", fmt.Sprintf("%s-%d", dc.GetName(), version))},
		},
	}
}

func hasConfigChange(dc *unstructured.Unstructured) bool {
	triggers, _, _ := unstructured.NestedSlice(dc.Object, "spec", "triggers")
	for _, t := range triggers {
		if m, ok := t.(map[string]interface{}); ok && m["type"] == "ConfigChange" {
			return true
		}
	}
	return false
}
