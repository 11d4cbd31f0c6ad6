package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// benchLabel marks every workload a scenario creates; the recorder watches
// the workloads that carry it.
const benchLabel = "restart-bench"

// objectSet is what a scenario creates and changes: sources, the workloads
// that read them, and which source each phase changes. The harness
// (harness.go) knows nothing else of a scenario's objects.
type objectSet interface {
	// summary describes the objects for the report.
	summary() string
	create(ctx context.Context, cs kubernetes.Interface, creators int) error
	workloadCount() int
	dataBytes() int64
	// singles are the n changes of the round-th single-change phase, each
	// on a workload no other phase changes.
	singles(round, n int) []sourceRef
	// fanOut are n simultaneous changes.
	fanOut(n int) []sourceRef
	// maxFanOut is the largest n fanOut supports.
	maxFanOut() int
	// newChange prepares the update of ref, so that generating data does
	// not delay the phase that sends it.
	newChange(r *rand.ChaCha8, ref sourceRef) func(context.Context, kubernetes.Interface) error
}

// workloadRef names a workload: "deployments", "statefulsets" or
// "daemonsets" of apps/v1.
type workloadRef struct{ resource, ns, name string }

func (w workloadRef) key() string { return w.resource + "/" + w.ns + "/" + w.name }

// sourceRef is one source a change rewrites, and the workload that reads it.
type sourceRef struct {
	kind string // "configmap" or "secret", as in the applied-checksums keys
	ns   string
	idx  int // i of the source's name
	name string
	wl   workloadRef
	form string // how the workload reads it
}

// id is the source's key in the applied-checksums annotation.
func (s sourceRef) id() string { return s.kind + "/" + s.ns + "/" + s.name }

// defaultSet is the default scenario: Deployments in namespace bench, each
// reading two ConfigMaps and two Secrets of sized random data (objects.go).
type defaultSet struct {
	configMaps, secrets, deployments int
	sz                               sizes
	update                           string // put or merge-patch
}

func newDefaultSet(o options, scale int) objectSet {
	return &defaultSet{configMaps: o.configMaps, secrets: o.secrets, deployments: o.deployments, sz: sizesFor(o, scale), update: o.update}
}

func (d *defaultSet) summary() string {
	return fmt.Sprintf("%d ConfigMaps × %d kB and %d Secrets × %d kB (10 keys each, random data); %d Deployments (replicas 0) each reading 2 ConfigMaps (volume; env configMapKeyRef) and 2 Secrets (envFrom; projected items); changes: %s",
		d.configMaps, d.sz.cmKey*keysPerSource/1000, d.secrets, d.sz.secretKey*keysPerSource/1000, d.deployments, map[string]string{
			"put":         "unconditional update of the whole object, new random data in every key, protobuf (`--update put`)",
			"merge-patch": "JSON merge patch of key k0 (`--update merge-patch`)",
		}[d.update])
}

func (d *defaultSet) workloadCount() int { return d.deployments }
func (d *defaultSet) maxFanOut() int     { return 2 * d.deployments }

func (d *defaultSet) dataBytes() int64 {
	return int64(d.configMaps)*int64(d.sz.cmKey)*keysPerSource + int64(d.secrets)*int64(d.sz.secretKey)*keysPerSource
}

func (d *defaultSet) create(ctx context.Context, cs kubernetes.Interface, creators int) error {
	if err := createNamespaces(ctx, cs, namespace); err != nil {
		return err
	}
	jobs := append(append(creations("configmap", d.configMaps), creations("secret", d.secrets)...), creations("deployment", d.deployments)...)
	return createAll(ctx, creators, jobs, func(ctx context.Context, r *rand.ChaCha8, j creation) error {
		var err error
		switch j.kind {
		case "configmap":
			_, err = cs.CoreV1().ConfigMaps(namespace).Create(ctx, configMap(r, j.i, d.sz), metav1.CreateOptions{})
		case "secret":
			_, err = cs.CoreV1().Secrets(namespace).Create(ctx, secret(r, j.i, d.sz), metav1.CreateOptions{})
		default:
			_, err = cs.AppsV1().Deployments(namespace).Create(ctx, deployment(j.i), metav1.CreateOptions{})
		}
		return err
	})
}

// readBy lists the four sources Deployment i reads, in the order of the
// reference forms of deployment().
func readBy(i int) [4]sourceRef {
	wl := workloadRef{"deployments", namespace, depName(i)}
	return [4]sourceRef{
		{"configmap", namespace, 2 * i, cmName(2 * i), wl, "ConfigMap volume"},
		{"configmap", namespace, 2*i + 1, cmName(2*i + 1), wl, "ConfigMap env key"},
		{"secret", namespace, 2 * i, secretName(2 * i), wl, "Secret envFrom"},
		{"secret", namespace, 2*i + 1, secretName(2*i + 1), wl, "Secret projected items"},
	}
}

// singles take the last Deployments, apart for each round: the fan-out
// phases change the first ones, and no earlier change may still be pending
// on a Deployment a single change measures. They cycle through the four
// reference forms.
func (d *defaultSet) singles(round, n int) []sourceRef {
	first := d.deployments - (round+1)*n
	out := make([]sourceRef, 0, n)
	for j := range n {
		out = append(out, readBy(first + j)[j%4])
	}
	return out
}

// fanOut picks n changes: with n ≤ Deployments, one source for each of the
// first n Deployments, the ConfigMap volume and env forms alternating;
// beyond, both ConfigMaps of the first n/2 Deployments.
func (d *defaultSet) fanOut(n int) []sourceRef {
	out := make([]sourceRef, 0, n)
	for k := range n {
		if n <= d.deployments {
			out = append(out, readBy(k)[k%2])
		} else {
			out = append(out, readBy(k / 2)[k%2])
		}
	}
	return out
}

// newChange: with --update put the whole object with new random data in
// every key, sent as an unconditional update in protobuf (cheap for the API
// server, which shares the cores with the controller); with --update
// merge-patch a JSON merge patch of key k0 alone (what `kubectl patch`
// sends; the API server round-trips the whole object through JSON to apply
// it). Both change data every reference form reads.
func (d *defaultSet) newChange(r *rand.ChaCha8, ref sourceRef) func(context.Context, kubernetes.Interface) error {
	if d.update == "merge-patch" {
		var v string
		if ref.kind == "configmap" {
			v = textValue(r, d.sz.cmKey)
		} else {
			v = base64.StdEncoding.EncodeToString(binValue(r, d.sz.secretKey))
		}
		body, _ := json.Marshal(map[string]any{"data": map[string]string{changedKey: v}})
		return func(ctx context.Context, cs kubernetes.Interface) error {
			var err error
			if ref.kind == "configmap" {
				_, err = cs.CoreV1().ConfigMaps(ref.ns).Patch(ctx, ref.name, types.MergePatchType, body, metav1.PatchOptions{})
			} else {
				_, err = cs.CoreV1().Secrets(ref.ns).Patch(ctx, ref.name, types.MergePatchType, body, metav1.PatchOptions{})
			}
			return err
		}
	}
	if ref.kind == "configmap" {
		cm := configMap(r, ref.idx, d.sz)
		return func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ConfigMaps(ref.ns).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}
	}
	s := secret(r, ref.idx, d.sz)
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Secrets(ref.ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}
}
