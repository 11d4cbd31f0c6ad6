package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/events"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/watch"
)

// accessReviewer asks the API server, with a SelfSubjectAccessReview, whether
// this process may use a verb on a resource. Every authenticated user may
// create one (system:basic-user), so it needs no rule in the ClusterRole.
func accessReviewer(reviews authorizationv1client.SelfSubjectAccessReviewInterface) watch.AccessChecker {
	return func(ctx context.Context, verb string, gvr schema.GroupVersionResource, namespace string) (bool, error) {
		review, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
			},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("creating a SelfSubjectAccessReview: %w", err)
		}
		return review.Status.Allowed, nil
	}
}

// selfReference is the object Events about this process are recorded on: its
// own Pod when POD_NAME and POD_NAMESPACE are set (the manifests set them;
// POD_UID too, if set, so that `kubectl describe pod` lists them), otherwise
// the leader election Lease, otherwise nothing (nil).
func selfReference(s config.Settings, lookupEnv func(string) (string, bool)) *corev1.ObjectReference {
	name, _ := lookupEnv("POD_NAME")
	namespace, _ := lookupEnv("POD_NAMESPACE")
	if name != "" && namespace != "" {
		uid, _ := lookupEnv("POD_UID")
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name, UID: types.UID(uid)}
	}
	if s.LeaderElect {
		return &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: s.LeaseNamespace, Name: s.LeaseName}
	}
	return nil
}

// healthEvents records a Warning Event when a kind becomes degraded and a
// Normal one when it recovers, on self (nil: logs once that it cannot).
func healthEvents(recorder events.EventRecorder, self *corev1.ObjectReference, log hclog.Logger) func(watch.HealthChange) {
	var once sync.Once
	return func(c watch.HealthChange) {
		if self == nil {
			once.Do(func() {
				log.Warn("not recording Events about degraded kinds: neither POD_NAME and POD_NAMESPACE nor leader election " +
					"name an object to record them on; the log, restart_controller_kind_degraded and /readyz report them")
			})
			return
		}
		if c.Recovered {
			recorder.Eventf(self, nil, corev1.EventTypeNormal, "KindRecovered", "Watch", "%s: works again", c.Target)
			return
		}
		detail := c.Detail
		if len(detail) > 400 {
			detail = detail[:400] + "..."
		}
		recorder.Eventf(self, nil, corev1.EventTypeWarning, "KindDegraded", "Watch", "%s (%s)", c.Summary(), detail)
	}
}
