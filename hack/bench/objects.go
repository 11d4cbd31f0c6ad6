package main

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

const (
	namespace     = "bench"
	keysPerSource = 10
	// changedKey is the key every change rewrites: the env configMapKeyRef and
	// the projected Secret items read it, the whole-object forms read it too.
	changedKey = "k0"

	optInAnnotation   = "com.xing.deployment-restart"
	appliedAnnotation = "com.xing.deployment-restart.applied-config-checksums"
	restartAnnotation = "com.xing.deployment-restart.timestamp"
)

func cmName(i int) string     { return fmt.Sprintf("cm-%04d", i) }
func secretName(i int) string { return fmt.Sprintf("secret-%04d", i) }
func depName(i int) string    { return fmt.Sprintf("dep-%03d", i) }

// sizes are the per-key value sizes of one scale, in bytes.
type sizes struct{ cmKey, secretKey int }

func sizesFor(o options, scale int) sizes {
	return sizes{
		cmKey:     o.configMapKB * 1000 * scale / keysPerSource / 4 * 4, // base64 text: a multiple of 4
		secretKey: o.secretKB * 1000 * scale / keysPerSource,
	}
}

// sourceBytes is the data of every ConfigMap and Secret at these sizes.
func sourceBytes(o options, sz sizes) int64 {
	return int64(o.configMaps)*int64(sz.cmKey)*keysPerSource + int64(o.secrets)*int64(sz.secretKey)*keysPerSource
}

// newRand returns a fast generator seeded from the OS; its output is
// incompressible, so etcd and the API server cannot shrink the sources.
func newRand() *rand.ChaCha8 {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}

// textValue returns n characters of base64 text (6 random bits each).
func textValue(r *rand.ChaCha8, n int) string {
	raw := make([]byte, n/4*3)
	_, _ = r.Read(raw)
	return base64.StdEncoding.EncodeToString(raw)
}

func binValue(r *rand.ChaCha8, n int) []byte {
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

func configMap(r *rand.ChaCha8, i int, sz sizes) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName(i), Namespace: namespace},
		Data:       make(map[string]string, keysPerSource),
	}
	for k := range keysPerSource {
		cm.Data[fmt.Sprintf("k%d", k)] = textValue(r, sz.cmKey)
	}
	return cm
}

func secret(r *rand.ChaCha8, i int, sz sizes) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName(i), Namespace: namespace},
		Type:       corev1.SecretTypeOpaque,
		Data:       make(map[string][]byte, keysPerSource),
	}
	for k := range keysPerSource {
		s.Data[fmt.Sprintf("k%d", k)] = binValue(r, sz.secretKey)
	}
	return s
}

// deployment i reads, through four reference forms:
//
//	ConfigMap 2i    as a volume (the whole object)
//	ConfigMap 2i+1  through env valueFrom.configMapKeyRef (key k0)
//	Secret 2i       through envFrom.secretRef (the whole object)
//	Secret 2i+1     through a projected volume with items (keys k0, k1)
//
// It has no replicas: the benchmark measures the controller, not pod churn.
func deployment(i int) *appsv1.Deployment {
	labels := map[string]string{"app": depName(i)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: depName(i), Namespace: namespace,
			Annotations: map[string]string{optInAnnotation: "enabled"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{testcluster.NodeLabelKey: testcluster.NodeLabelValue},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:  "app",
						Image: "registry.example/app:1",
						Env: []corev1.EnvVar{{
							Name: "SETTING",
							ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: cmName(2*i + 1)},
								Key:                  changedKey,
							}},
						}},
						EnvFrom: []corev1.EnvFromSource{{
							SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secretName(2 * i)}},
						}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/config"},
							{Name: "secrets", MountPath: "/etc/secrets"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: cmName(2 * i)},
						}}},
						{Name: "secrets", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
							Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
								LocalObjectReference: corev1.LocalObjectReference{Name: secretName(2*i + 1)},
								Items:                []corev1.KeyToPath{{Key: "k0", Path: "k0"}, {Key: "k1", Path: "k1"}},
							}}},
						}}},
					},
				},
			},
		},
	}
}

// createObjects creates the namespace, the sources and the Deployments with a
// bounded pool of workers, retrying transient errors.
func createObjects(ctx context.Context, cs kubernetes.Interface, o options, sz sizes, workers int) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &creator{cs: cs, sz: sz, total: o.configMaps + o.secrets + o.deployments, cancel: cancel}
	jobs := make(chan creation)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx, jobs)
		}()
	}
	// Interleaved per kind would not change the totals; sources go first so
	// that no Deployment exists before what it reads.
	sendCreations(ctx, jobs, "configmap", o.configMaps)
	sendCreations(ctx, jobs, "secret", o.secrets)
	sendCreations(ctx, jobs, "deployment", o.deployments)
	close(jobs)
	wg.Wait()
	if c.firstErr != nil {
		return c.firstErr
	}
	return ctx.Err()
}

// creation is one object to create: cm-i, secret-i or dep-i.
type creation struct {
	kind string // "configmap", "secret" or "deployment"
	i    int
}

func sendCreations(ctx context.Context, jobs chan<- creation, kind string, n int) {
	for i := range n {
		select {
		case jobs <- creation{kind, i}:
		case <-ctx.Done():
			return
		}
	}
}

// creator is what the creating workers share; the first error stops them all.
type creator struct {
	cs       kubernetes.Interface
	sz       sizes
	total    int
	done     atomic.Int64
	errOnce  sync.Once
	firstErr error
	cancel   context.CancelFunc
}

func (c *creator) work(ctx context.Context, jobs <-chan creation) {
	r := newRand()
	for j := range jobs {
		if err := retryTransient(ctx, func() error { return c.create(ctx, r, j) }); err != nil {
			c.errOnce.Do(func() { c.firstErr = fmt.Errorf("creating %s %d: %w", j.kind, j.i, err); c.cancel() })
			continue
		}
		if n := c.done.Add(1); n%1000 == 0 || int(n) == c.total {
			logf("  created %d/%d objects", n, c.total)
		}
	}
}

// create treats an object that exists already as created: a retry after a
// timeout may find the first attempt's.
func (c *creator) create(ctx context.Context, r *rand.ChaCha8, j creation) error {
	var err error
	switch j.kind {
	case "configmap":
		_, err = c.cs.CoreV1().ConfigMaps(namespace).Create(ctx, configMap(r, j.i, c.sz), metav1.CreateOptions{})
	case "secret":
		_, err = c.cs.CoreV1().Secrets(namespace).Create(ctx, secret(r, j.i, c.sz), metav1.CreateOptions{})
	default:
		_, err = c.cs.AppsV1().Deployments(namespace).Create(ctx, deployment(j.i), metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func retryTransient(ctx context.Context, f func() error) error {
	var err error
	for attempt := range 6 {
		if err = f(); err == nil {
			return nil
		}
		if !(apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsConflict(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return err
}

// sourceRef is one source a change rewrites, and the Deployment that reads it.
type sourceRef struct {
	kind  string // "configmap" or "secret", as in the applied-checksums keys
	index int    // i of cm-i / secret-i
	dep   int
	form  string
}

func (c sourceRef) name() string {
	if c.kind == "configmap" {
		return cmName(c.index)
	}
	return secretName(c.index)
}

func (c sourceRef) id() string { return c.kind + "/" + namespace + "/" + c.name() }

// readBy lists the four sources Deployment d reads, in the order of the
// reference forms of deployment().
func readBy(d int) [4]sourceRef {
	return [4]sourceRef{
		{"configmap", 2 * d, d, "ConfigMap volume"},
		{"configmap", 2*d + 1, d, "ConfigMap env key"},
		{"secret", 2 * d, d, "Secret envFrom"},
		{"secret", 2*d + 1, d, "Secret projected items"},
	}
}

// change is one prepared source update. With --update put it is the whole
// object with new random data in every key, sent as an unconditional update in
// protobuf (cheap for the API server, which shares the 2 cores with the
// controller); with --update merge-patch it is a JSON merge patch of key k0
// alone (what `kubectl patch` sends; the API server round-trips the whole
// object through JSON to apply it). Both change data every reference form
// reads. Changes are built before a phase starts so that generating data does
// not delay the updates.
type change struct {
	patch  []byte
	cm     *corev1.ConfigMap
	secret *corev1.Secret
}

func prepareChange(r *rand.ChaCha8, c sourceRef, index int, sz sizes, method string) change {
	if method == "merge-patch" {
		var v string
		if c.kind == "configmap" {
			v = textValue(r, sz.cmKey)
		} else {
			v = base64.StdEncoding.EncodeToString(binValue(r, sz.secretKey))
		}
		body, _ := json.Marshal(map[string]any{"data": map[string]string{changedKey: v}})
		return change{patch: body}
	}
	if c.kind == "configmap" {
		return change{cm: configMap(r, index, sz)}
	}
	return change{secret: secret(r, index, sz)}
}

func applyChange(ctx context.Context, cs kubernetes.Interface, c sourceRef, ch change) error {
	var err error
	switch {
	case ch.cm != nil:
		_, err = cs.CoreV1().ConfigMaps(namespace).Update(ctx, ch.cm, metav1.UpdateOptions{})
	case ch.secret != nil:
		_, err = cs.CoreV1().Secrets(namespace).Update(ctx, ch.secret, metav1.UpdateOptions{})
	case c.kind == "configmap":
		_, err = cs.CoreV1().ConfigMaps(namespace).Patch(ctx, c.name(), types.MergePatchType, ch.patch, metav1.PatchOptions{})
	default:
		_, err = cs.CoreV1().Secrets(namespace).Patch(ctx, c.name(), types.MergePatchType, ch.patch, metav1.PatchOptions{})
	}
	return err
}

// unrelatedNamespace holds the large sources: no Deployment reads them.
const unrelatedNamespace = "bench-unrelated"

func largeName(i int) string { return fmt.Sprintf("large-%02d", i) }

// largeConfigMap has keys empty keys: a tenant's cheapest way to make many
// keys (80,000 fit in a valid 1 MB ConfigMap). Names are as short
// as base 36 allows, so that the object, with the managedFields entry the
// API server adds for each key, stays within etcd's request limit.
func largeConfigMap(i, keys int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: largeName(i), Namespace: unrelatedNamespace},
		Data:       make(map[string]string, keys),
	}
	width := len(strconv.FormatInt(int64(keys-1), 36))
	for k := range keys {
		name := strconv.FormatInt(int64(k), 36)
		cm.Data[strings.Repeat("0", width-len(name))+name] = ""
	}
	return cm
}

// createLargeSources creates n large ConfigMaps in the unrelated namespace
// and returns the size of their protobuf encoding.
func createLargeSources(ctx context.Context, cs kubernetes.Interface, n, keys int) (int64, error) {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unrelatedNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	var size int64
	for i := range n {
		cm := largeConfigMap(i, keys)
		size += int64(cm.Size())
		err := retryTransient(ctx, func() error {
			_, err := cs.CoreV1().ConfigMaps(unrelatedNamespace).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return size, fmt.Errorf("creating %s/%s (%d keys): %w", unrelatedNamespace, cm.Name, keys, err)
		}
	}
	return size, nil
}
