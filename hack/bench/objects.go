package main

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
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
			Labels:      map[string]string{benchLabel: "default"},
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

// createAll runs create for every job from workers goroutines, retrying
// transient errors; the first lasting error stops them all. An object that
// exists already counts as created: a retry after a timeout may find the
// first attempt's.
func createAll(ctx context.Context, workers int, jobs []creation, create func(context.Context, *rand.ChaCha8, creation) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &creator{total: len(jobs), cancel: cancel, create: create}
	ch := make(chan creation)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx, ch)
		}()
	}
	for _, j := range jobs {
		select {
		case ch <- j:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
	if c.firstErr != nil {
		return c.firstErr
	}
	return ctx.Err()
}

// creation is one object to create: kind and index.
type creation struct {
	kind string // "configmap", "secret", or a workload
	i    int
}

// creations lists n jobs of kind; sources go first in createAll's list so
// that no workload exists before what it reads.
func creations(kind string, n int) []creation {
	out := make([]creation, n)
	for i := range out {
		out[i] = creation{kind, i}
	}
	return out
}

// creator is what the creating workers share.
type creator struct {
	total    int
	done     atomic.Int64
	errOnce  sync.Once
	firstErr error
	cancel   context.CancelFunc
	create   func(context.Context, *rand.ChaCha8, creation) error
}

func (c *creator) work(ctx context.Context, jobs <-chan creation) {
	r := newRand()
	for j := range jobs {
		err := retryTransient(ctx, func() error {
			if err := c.create(ctx, r, j); !apierrors.IsAlreadyExists(err) {
				return err
			}
			return nil
		})
		if err != nil {
			c.errOnce.Do(func() { c.firstErr = fmt.Errorf("creating %s %d: %w", j.kind, j.i, err); c.cancel() })
			continue
		}
		if n := c.done.Add(1); n%5000 == 0 || int(n) == c.total {
			logf("  created %d/%d objects", n, c.total)
		}
	}
}

// createNamespaces creates each namespace unless it exists.
func createNamespaces(ctx context.Context, cs kubernetes.Interface, names ...string) error {
	for _, n := range names {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", n, err)
		}
	}
	return nil
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
