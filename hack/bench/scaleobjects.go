package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The scale scenario: W opted-in workloads of three kinds over S
// small ConfigMaps and Secrets, spread over scaleNamespaces namespaces.
//
//	workload i             w-NNNNN in namespace scale-(i mod 10); i mod 20 < 12 a
//	                       Deployment, < 17 a StatefulSet, else a DaemonSet
//	                       (60/25/15 %), all with no pods: replicas 0, and a
//	                       DaemonSet's node selector matches no node
//	reads cm-i             as a volume (the whole object)
//	reads secret-i         through envFrom (the whole object)
//	and, for i < S − 2W,   cm-(W + i/2) through env configMapKeyRef (i even)
//	                       or secret-(W + i/2) through projected items (i odd)
//
// Every source is read by exactly one workload (S = 3W) or by none (the
// sources beyond 3W); each lives in its reader's namespace.
const (
	scaleNamespaces = 10
	scaleLabel      = "restart-bench"
	scaleLabelValue = "scale"
	scaleValueBytes = 32 // per key; two keys per source: object counts, not bytes
)

type scaleSpec struct{ workloads, sources int }

func (s scaleSpec) extra() int      { return s.sources - 2*s.workloads }
func (s scaleSpec) configMaps() int { return s.workloads + (s.extra()+1)/2 }
func (s scaleSpec) secrets() int    { return s.workloads + s.extra()/2 }
func scaleNS(i int) string          { return fmt.Sprintf("scale-%d", i%scaleNamespaces) }
func wlName(i int) string           { return fmt.Sprintf("w-%05d", i) }
func scaleSourceName(kind string, idx int) string {
	if kind == "configmap" {
		return fmt.Sprintf("cm-%05d", idx)
	}
	return fmt.Sprintf("secret-%05d", idx)
}

// wlResource is the resource of workload i.
func wlResource(i int) string {
	switch r := i % 20; {
	case r < 12:
		return "deployments"
	case r < 17:
		return "statefulsets"
	default:
		return "daemonsets"
	}
}

// scaleRef is one source and the workload that reads it.
type scaleRef struct {
	kind string // configmap or secret
	idx  int
	wl   int
}

// readerOf is the workload index that reads source idx of kind (its
// namespace's index too); ok is false for an unread source.
func (s scaleSpec) readerOf(kind string, idx int) (int, bool) {
	if idx < s.workloads {
		return idx, true
	}
	i := 2 * (idx - s.workloads)
	if kind == "secret" {
		i++
	}
	return i, i < s.workloads && i < s.extra()
}

func (s scaleSpec) sourceNS(kind string, idx int) string {
	i, _ := s.readerOf(kind, idx)
	return scaleNS(i)
}

// reads lists the sources workload i reads.
func (s scaleSpec) reads(i int) []scaleRef {
	out := []scaleRef{{"configmap", i, i}, {"secret", i, i}}
	if i < s.extra() {
		kind := "configmap"
		if i%2 == 1 {
			kind = "secret"
		}
		out = append(out, scaleRef{kind, s.workloads + i/2, i})
	}
	return out
}

func (r scaleRef) key() string { return wlResource(r.wl) + "/" + scaleNS(r.wl) + "/" + wlName(r.wl) }

func (s scaleSpec) configMap(r *rand.ChaCha8, idx int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: scaleSourceName("configmap", idx), Namespace: s.sourceNS("configmap", idx)},
		Data:       map[string]string{"k0": textValue(r, scaleValueBytes), "k1": textValue(r, scaleValueBytes)},
	}
}

func (s scaleSpec) secret(r *rand.ChaCha8, idx int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: scaleSourceName("secret", idx), Namespace: s.sourceNS("secret", idx)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"k0": binValue(r, scaleValueBytes), "k1": binValue(r, scaleValueBytes)},
	}
}

// podTemplate reads the sources of workload i through the forms above.
func (s scaleSpec) podTemplate(i int, nodeSelector map[string]string) corev1.PodTemplateSpec {
	c := corev1.Container{
		Name: "app", Image: "registry.example/app:1",
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: scaleSourceName("secret", i)}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config"}},
	}
	vols := []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: scaleSourceName("configmap", i)}}}}}
	if refs := s.reads(i); len(refs) == 3 {
		third := refs[2]
		if third.kind == "configmap" {
			c.Env = []corev1.EnvVar{{Name: "SETTING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: scaleSourceName("configmap", third.idx)}, Key: "k0"}}}}
		} else {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "secrets", MountPath: "/etc/secrets"})
			vols = append(vols, corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: scaleSourceName("secret", third.idx)},
					Items:                []corev1.KeyToPath{{Key: "k0", Path: "k0"}},
				}}}}}})
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": wlName(i)}},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:   []corev1.Container{c},
			Volumes:      vols,
		},
	}
}

// createWorkload creates workload i; none of them has a pod.
func (s scaleSpec) createWorkload(ctx context.Context, cs kubernetes.Interface, i int) error {
	meta := metav1.ObjectMeta{
		Name: wlName(i), Namespace: scaleNS(i),
		Labels:      map[string]string{scaleLabel: scaleLabelValue},
		Annotations: map[string]string{optInAnnotation: "enabled"},
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": wlName(i)}}
	zero := int32(0)
	var err error
	switch wlResource(i) {
	case "deployments":
		_, err = cs.AppsV1().Deployments(meta.Namespace).Create(ctx, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: &zero, Selector: selector, Template: s.podTemplate(i, nil)}}, metav1.CreateOptions{})
	case "statefulsets":
		_, err = cs.AppsV1().StatefulSets(meta.Namespace).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{
			Replicas: &zero, Selector: selector, ServiceName: "scale", Template: s.podTemplate(i, nil)}}, metav1.CreateOptions{})
	default:
		// No node has this label: the DaemonSet has no pods.
		_, err = cs.AppsV1().DaemonSets(meta.Namespace).Create(ctx, &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{
			Selector: selector, Template: s.podTemplate(i, map[string]string{"restart-bench/none": "true"})}}, metav1.CreateOptions{})
	}
	return err
}

// createScaleObjects creates the namespaces, the sources, then the
// workloads, from workers concurrent creators.
func createScaleObjects(ctx context.Context, cs kubernetes.Interface, s scaleSpec, workers int) error {
	for n := range scaleNamespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNS(n)}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := s.configMaps() + s.secrets() + s.workloads
	jobs := make(chan creation)
	var (
		wg       sync.WaitGroup
		done     atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRand()
			for j := range jobs {
				err := retryTransient(ctx, func() error {
					var err error
					switch j.kind {
					case "configmap":
						_, err = cs.CoreV1().ConfigMaps(s.sourceNS(j.kind, j.i)).Create(ctx, s.configMap(r, j.i), metav1.CreateOptions{})
					case "secret":
						_, err = cs.CoreV1().Secrets(s.sourceNS(j.kind, j.i)).Create(ctx, s.secret(r, j.i), metav1.CreateOptions{})
					default:
						err = s.createWorkload(ctx, cs, j.i)
					}
					if apierrors.IsAlreadyExists(err) {
						return nil
					}
					return err
				})
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("creating %s %d: %w", j.kind, j.i, err); cancel() })
					continue
				}
				if n := done.Add(1); n%5000 == 0 || int(n) == total {
					logf("  created %d/%d objects", n, total)
				}
			}
		}()
	}
	sendCreations(ctx, jobs, "configmap", s.configMaps())
	sendCreations(ctx, jobs, "secret", s.secrets())
	sendCreations(ctx, jobs, "workload", s.workloads)
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// applyScaleChange rewrites every key of the source (a whole-object
// protobuf update, as the default scenario's --update put).
func (s scaleSpec) applyScaleChange(ctx context.Context, cs kubernetes.Interface, ref scaleRef, r *rand.ChaCha8) error {
	var err error
	if ref.kind == "configmap" {
		cm := s.configMap(r, ref.idx)
		_, err = cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	} else {
		sec := s.secret(r, ref.idx)
		_, err = cs.CoreV1().Secrets(sec.Namespace).Update(ctx, sec, metav1.UpdateOptions{})
	}
	return err
}
