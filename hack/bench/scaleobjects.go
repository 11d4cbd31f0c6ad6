package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	scaleValueBytes = 32 // per key; two keys per source: object counts, not bytes
)

type scaleSpec struct{ workloads, sources int }

func (s scaleSpec) workloadCount() int { return s.workloads }

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

// ref is source idx of kind, read by workload wl.
func (s scaleSpec) ref(kind string, idx, wl int, form string) sourceRef {
	return sourceRef{kind: kind, ns: scaleNS(wl), idx: idx, name: scaleSourceName(kind, idx),
		wl: workloadRef{wlResource(wl), scaleNS(wl), wlName(wl)}, form: form}
}

// reads lists the sources workload i reads.
func (s scaleSpec) reads(i int) []sourceRef {
	out := []sourceRef{s.ref("configmap", i, i, "ConfigMap volume"), s.ref("secret", i, i, "Secret envFrom")}
	if i < s.extra() {
		if i%2 == 0 {
			out = append(out, s.ref("configmap", s.workloads+i/2, i, "ConfigMap env key"))
		} else {
			out = append(out, s.ref("secret", s.workloads+i/2, i, "Secret projected items"))
		}
	}
	return out
}

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
		Labels:      map[string]string{benchLabel: "scale"},
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

func (s scaleSpec) summary() string {
	return fmt.Sprintf("%d opted-in workloads (%d Deployments, %d StatefulSets, %d DaemonSets; no pods) over %d ConfigMaps and %d Secrets of 2 keys × %d bytes in %d namespaces; changes: whole-object protobuf updates of every key",
		s.workloads, s.countKind("deployments"), s.countKind("statefulsets"), s.countKind("daemonsets"), s.configMaps(), s.secrets(), scaleValueBytes, scaleNamespaces)
}

func (s scaleSpec) countKind(resource string) int {
	n := 0
	for i := range s.workloads {
		if wlResource(i) == resource {
			n++
		}
	}
	return n
}

func (s scaleSpec) dataBytes() int64 {
	return int64(s.configMaps()+s.secrets()) * 2 * scaleValueBytes
}

func (s scaleSpec) maxFanOut() int { return s.workloads }

// singles take the last workloads (each kind, each reference form), apart
// for each round.
func (s scaleSpec) singles(round, n int) []sourceRef {
	var out []sourceRef
	for j := range n {
		i := s.workloads - 1 - round*n - j
		refs := s.reads(i)
		out = append(out, refs[j%len(refs)])
	}
	return out
}

// fanOut changes one source of each of the first n workloads.
func (s scaleSpec) fanOut(n int) []sourceRef {
	var out []sourceRef
	for i := range n {
		refs := s.reads(i)
		out = append(out, refs[i%len(refs)])
	}
	return out
}

// create creates the namespaces, the sources, then the workloads.
func (s scaleSpec) create(ctx context.Context, cs kubernetes.Interface, creators int) error {
	var names []string
	for n := range scaleNamespaces {
		names = append(names, scaleNS(n))
	}
	if err := createNamespaces(ctx, cs, names...); err != nil {
		return err
	}
	jobs := append(append(creations("configmap", s.configMaps()), creations("secret", s.secrets())...), creations("workload", s.workloads)...)
	return createAll(ctx, creators, jobs, func(ctx context.Context, r *rand.ChaCha8, j creation) error {
		var err error
		switch j.kind {
		case "configmap":
			_, err = cs.CoreV1().ConfigMaps(s.sourceNS(j.kind, j.i)).Create(ctx, s.configMap(r, j.i), metav1.CreateOptions{})
		case "secret":
			_, err = cs.CoreV1().Secrets(s.sourceNS(j.kind, j.i)).Create(ctx, s.secret(r, j.i), metav1.CreateOptions{})
		default:
			err = s.createWorkload(ctx, cs, j.i)
		}
		return err
	})
}

// newChange rewrites every key of the source (a whole-object protobuf
// update, as the default scenario's --update put).
func (s scaleSpec) newChange(r *rand.ChaCha8, ref sourceRef) func(context.Context, kubernetes.Interface) error {
	if ref.kind == "configmap" {
		cm := s.configMap(r, ref.idx)
		return func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}
	}
	sec := s.secret(r, ref.idx)
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Secrets(sec.Namespace).Update(ctx, sec, metav1.UpdateOptions{})
		return err
	}
}
