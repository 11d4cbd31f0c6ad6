package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// rolloutCRD serves Argo Rollouts' resource with the status subresource the
// real CRD has, so that the stand-in's status writes do not raise the
// generation. No schema: the suite's typed client and the controller read
// only fields the stand-in or the suite writes.
const rolloutCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: rollouts.argoproj.io}
spec:
  group: argoproj.io
  scope: Namespaced
  names: {plural: rollouts, singular: rollout, kind: Rollout, listKind: RolloutList, shortNames: [ro]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

var (
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
)

// argoStandIn installs the Rollout CRD and, until ctx ends, plays the part
// of Argo Rollouts' controller that the suite observes: each Rollout's
// status says all its replicas are ready and healthy at its generation, and
// status.restartedAt follows spec.restartAt once set (Argo sets it when it
// has replaced the pods). It creates no pods: what the suite checks is what
// the restart controller writes on the Rollout (the template annotation, or
// spec.restartAt), not what Argo does with it.
func argoStandIn(ctx context.Context, kubeconfig string) error {
	client, err := installCRD(ctx, kubeconfig, rolloutCRD, rolloutsGVR)
	if err != nil {
		return err
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) { settleRollouts(ctx, client) }, 300*time.Millisecond)
	return nil
}

// installCRD installs a CRD and waits until its resource is served.
func installCRD(ctx context.Context, kubeconfig, manifest string, gvr schema.GroupVersionResource) (dynamic.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(manifest), &crd.Object); err != nil {
		return nil, err
	}
	if _, err := client.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("installing the CRD of %s: %w", gvr.GroupResource(), err)
	}
	// Served once a list succeeds.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("waiting for %s to be served: %w", gvr.GroupResource(), err)
	}
	return client, nil
}

// settleRollouts writes the healthy status of every Rollout whose status
// does not say so yet.
func settleRollouts(ctx context.Context, client dynamic.Interface) {
	list, err := client.Resource(rolloutsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range list.Items {
		r := &list.Items[i]
		want := healthyStatus(r)
		if got, _, _ := unstructured.NestedMap(r.Object, "status"); fmt.Sprint(got) == fmt.Sprint(want) {
			continue
		}
		r.Object["status"] = want
		// A conflict or a deletion is settled on the next round.
		_, _ = client.Resource(rolloutsGVR).Namespace(r.GetNamespace()).UpdateStatus(ctx, r, metav1.UpdateOptions{})
	}
}

// healthyStatus is the status Argo Rollouts writes for r once every
// replica of its current template is available.
func healthyStatus(r *unstructured.Unstructured) map[string]interface{} {
	replicas, found, _ := unstructured.NestedInt64(r.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	s := map[string]interface{}{
		"observedGeneration": strconv.FormatInt(r.GetGeneration(), 10),
		"phase":              "Healthy",
		"replicas":           replicas,
		"updatedReplicas":    replicas,
		"readyReplicas":      replicas,
		"availableReplicas":  replicas,
	}
	if at, ok, _ := unstructured.NestedString(r.Object, "spec", "restartAt"); ok {
		s["restartedAt"] = at
	}
	return s
}
