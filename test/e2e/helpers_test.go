package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/checksumkey"
)

const (
	optInKey     = "com.xing.deployment-restart"
	appliedKey   = "com.xing.deployment-restart.applied-config-checksums"
	timestampKey = "com.xing.deployment-restart.timestamp"
	// waitLong bounds every wait; reaching it is a failure, never a timing assertion.
	waitLong = 90 * time.Second
)

var (
	deploymentsGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	statefulSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	daemonSetsGVR   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	if err := poll(cond); err != nil {
		fatalf(t, "timed out after %s waiting for %s (last error: %v)", waitLong, what, err)
	}
}

// failures holds each failed test's reason, so that it can be said again
// after the controllers' log tails: CI shows only the end of the output.
var failures sync.Map

// fatalf fails the test as t.Fatalf does, and keeps the reason for
// repeatFailure.
func fatalf(t *testing.T, format string, args ...interface{}) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	failures.Store(t.Name(), msg)
	t.Fatal(msg)
}

// repeatFailure says a failed test's reason again as its last line. It is
// registered first, so it runs after every other cleanup (log tails
// included).
func repeatFailure(t *testing.T) {
	start := time.Now()
	t.Cleanup(func() {
		if msg, ok := failures.Load(t.Name()); ok && t.Failed() {
			t.Logf("failed %s after the start: %s", time.Since(start).Round(time.Second), msg)
		}
	})
}

// poll calls cond until it holds, or returns its last error once waitLong
// has passed.
func poll(cond func() (bool, error)) error {
	return pollUntil(time.Now().Add(waitLong), cond)
}

// pollUntil calls cond until it holds, or returns its last error once the
// deadline has passed.
func pollUntil(deadline time.Time, cond func() (bool, error)) error {
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		lastErr = err
		time.Sleep(150 * time.Millisecond)
	}
	if lastErr == nil {
		lastErr = errors.New("condition not met")
	}
	return lastErr
}

// progress logs each step of a long test with the time since the test
// began, so that a failure's output says how far it got and how long each
// step took.
func progress(t *testing.T) func(step string) {
	start := time.Now()
	return func(step string) {
		t.Helper()
		t.Logf("%5.1fs: %s", time.Since(start).Seconds(), step)
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	repeatFailure(t)
	ctx := ctxFor(t)
	ns, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + dnsLabel(t.Name(), 30) + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	// The pods need the namespace's default ServiceAccount before they can be created.
	waitFor(t, "default service account in "+ns.Name, func() (bool, error) {
		_, err := env.kube.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// dnsLabel lowercases s and keeps what a namespace name allows, at most n characters.
func dnsLabel(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= n {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

func createConfigMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctxFor(t), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating configmap %s/%s: %v", ns, name, err)
	}
}

func updateConfigMap(t *testing.T, ns, name string, mutate func(*corev1.ConfigMap)) {
	t.Helper()
	ctx := ctxFor(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(cm)
		_, err = env.kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating configmap %s/%s: %v", ns, name, err)
	}
}

func setConfigMapKey(t *testing.T, ns, name, key, value string) {
	t.Helper()
	updateConfigMap(t, ns, name, func(cm *corev1.ConfigMap) {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
	})
}

func createSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	_, err := env.kube.CoreV1().Secrets(ns).Create(ctxFor(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating secret %s/%s: %v", ns, name, err)
	}
}

func setSecretKey(t *testing.T, ns, name, key, value string) {
	t.Helper()
	ctx := ctxFor(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := env.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[key] = []byte(value)
		_, err = env.kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating secret %s/%s: %v", ns, name, err)
	}
}

// podSpec returns a pod spec for kwok's simulated node plus the given YAML
// fragment (indented under spec), e.g. volumes or containers' env.
func podSpec(t *testing.T, fragment string) corev1.PodSpec {
	t.Helper()
	base := `
nodeSelector: {type: kwok}
tolerations: [{operator: Exists}]
terminationGracePeriodSeconds: 0
`
	var spec corev1.PodSpec
	if err := yaml.UnmarshalStrict([]byte(base+fragment), &spec); err != nil {
		t.Fatalf("pod spec fixture: %v\n%s", err, fragment)
	}
	if len(spec.Containers) == 0 {
		spec.Containers = []corev1.Container{{Name: "app", Image: "example/app:1"}}
	}
	return spec
}

type workloadOptions struct {
	optIn    bool
	replicas int32
}

func labelsFor(name string) map[string]string { return map[string]string{"app": name} }

func objectMeta(name string, opts workloadOptions) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Labels: labelsFor(name)}
	if opts.optIn {
		m.Annotations = map[string]string{optInKey: "enabled"}
	}
	return m
}

func createDeployment(t *testing.T, ns, name string, spec corev1.PodSpec, opts workloadOptions) {
	t.Helper()
	if opts.replicas == 0 {
		opts.replicas = 2
	}
	d := &appsv1.Deployment{
		ObjectMeta: objectMeta(name, opts),
		Spec: appsv1.DeploymentSpec{
			Replicas: &opts.replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

// workloadState is what the tests read back from the API server.
type workloadState struct {
	generation  int64
	annotations map[string]string
	restartedAt string
	replicaSets int // Deployments only
}

func getWorkload(t *testing.T, gvr schema.GroupVersionResource, ns, name string, templatePath ...string) workloadState {
	t.Helper()
	u, err := env.dynamic.Resource(gvr).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	if len(templatePath) == 0 {
		templatePath = []string{"spec", "template"}
	}
	path := append(append([]string{}, templatePath...), "metadata", "annotations", timestampKey)
	ts, _, _ := unstructuredString(u.Object, path...)
	state := workloadState{generation: u.GetGeneration(), annotations: u.GetAnnotations(), restartedAt: ts}
	if gvr == deploymentsGVR {
		// Every Deployment not created paused gets a first ReplicaSet from
		// its controller, a moment after it is created: a state read before
		// that would count it as a restart later.
		paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
		waitFor(t, fmt.Sprintf("deployment %s/%s's first ReplicaSet", ns, name), func() (bool, error) {
			rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil {
				return false, fmt.Errorf("listing replicasets of %s/%s: %w", ns, name, err)
			}
			state.replicaSets = len(rss.Items)
			return state.replicaSets > 0 || paused, nil
		})
	}
	return state
}

func unstructuredString(obj map[string]interface{}, path ...string) (string, bool, error) {
	var cur interface{} = obj
	for _, p := range path {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// waitRecorded waits until the controller has recorded the workload's applied
// checksums: only then is a later source change a change for it.
func waitRecorded(t *testing.T, gvr schema.GroupVersionResource, ns, name string, wantSources ...string) map[string]string {
	t.Helper()
	var applied map[string]string
	waitFor(t, fmt.Sprintf("applied checksums on %s %s/%s", gvr.Resource, ns, name), func() (bool, error) {
		w := getWorkload(t, gvr, ns, name)
		raw, ok := w.annotations[appliedKey]
		if !ok {
			return false, nil
		}
		applied = map[string]string{}
		if err := json.Unmarshal([]byte(raw), &applied); err != nil {
			return false, err
		}
		for _, src := range wantSources {
			if _, ok := applied[src]; !ok {
				return false, fmt.Errorf("%s missing from %s", src, raw)
			}
		}
		return true, nil
	})
	return applied
}

// waitDeploymentRestarts waits until the deployment shows exactly n restarts:
// n+1 ReplicaSets (each pod-template change makes one; a Deployment's
// generation is no count, as annotation-only patches bump it too), a restart
// timestamp in the template iff n > 0, and a finished rollout whose pods all
// come from the newest template.
func waitDeploymentRestarts(t *testing.T, ns, name string, n int) {
	t.Helper()
	ctx := ctxFor(t)
	waitFor(t, fmt.Sprintf("deployment %s/%s restarted %d time(s) and rolled out", ns, name, n), func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		if got := len(rss.Items) - 1; got != n {
			if got > n {
				t.Fatalf("deployment %s/%s restarted %d times, want %d", ns, name, got, n)
			}
			return false, fmt.Errorf("%d replicasets, want %d", len(rss.Items), n+1)
		}
		stamp := d.Spec.Template.Annotations[timestampKey]
		if (stamp != "") != (n > 0) {
			return false, fmt.Errorf("restart timestamp %q with %d restarts", stamp, n)
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas ||
			d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
			return false, fmt.Errorf("rollout not finished: %+v", d.Status)
		}
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Annotations[timestampKey] != stamp {
				return false, fmt.Errorf("pod %s still from an older template", p.Name)
			}
			running++
		}
		if running != int(*d.Spec.Replicas) {
			return false, fmt.Errorf("%d current pods, want %d", running, *d.Spec.Replicas)
		}
		return true, nil
	})
}

// assertNotRestarted checks a workload kept its pod template: the same
// restart timestamp and, for a Deployment, no new ReplicaSet.
func assertNotRestarted(t *testing.T, gvr schema.GroupVersionResource, ns, name string, before workloadState) {
	t.Helper()
	now := getWorkload(t, gvr, ns, name)
	if now.restartedAt != before.restartedAt || now.replicaSets != before.replicaSets {
		t.Fatalf("%s %s/%s was restarted: timestamp %q -> %q, replicasets %d -> %d",
			gvr.Resource, ns, name, before.restartedAt, now.restartedAt, before.replicaSets, now.replicaSets)
	}
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// sourceID names a source the way the applied checksums annotation does.
func sourceID(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// The reductions of examples/config.yaml's sources (dataFields), applied here
// to objects the test reads from the API server itself: the checksums they
// give are those of the sources' current data, whatever the controller's
// caches hold.
var (
	reduceConfigMap = catalog.ReduceSource([]string{"data", "binaryData"})
	reduceSecret    = catalog.ReduceSource([]string{"data"})
)

// configMapChecksum is the checksum of the ConfigMap's data a reference reads:
// the given keys, or every key when keys is nil, under the key the suite's
// controllers share.
func configMapChecksum(cm *corev1.ConfigMap, keys []string) (string, error) {
	return configMapChecksumIn(defaultKeyNamespace, cm, keys)
}

// configMapChecksumIn is configMapChecksum under the key of a controller
// whose own namespace (leaderElection.namespace) is keyNamespace.
func configMapChecksumIn(keyNamespace string, cm *corev1.ConfigMap, keys []string) (string, error) {
	return reducedChecksum(keyNamespace, reduceConfigMap, cm, keys)
}

func secretChecksum(s *corev1.Secret, keys []string) (string, error) {
	return reducedChecksum(defaultKeyNamespace, reduceSecret, s, keys)
}

func reducedChecksum(keyNamespace string, reduce func(interface{}) (interface{}, error), obj interface{}, keys []string) (string, error) {
	out, err := reduce(obj)
	if err != nil {
		return "", err
	}
	state, ok := out.(*catalog.SourceState)
	if !ok {
		return "", fmt.Errorf("reducing %T gave %T", obj, out)
	}
	sums, err := checksumKeyIn(keyNamespace)
	if err != nil {
		return "", err
	}
	return state.Checksum(sums, keys), nil
}

// defaultKeyNamespace holds the checksum key of the controllers that keep
// the default leaderElection.namespace: the suite's, and most tests' own.
const defaultKeyNamespace = "default"

var checksumKeys sync.Map // namespace -> checksum.Hasher

// checksumKeyIn reads the checksum key a controller keeps in its namespace,
// as an operator with access to that Secret could: the test computes the
// checksums the controller must have recorded.
func checksumKeyIn(namespace string) (checksum.Hasher, error) {
	if h, ok := checksumKeys.Load(namespace); ok {
		return h.(checksum.Hasher), nil
	}
	key, err := checksumkey.Read(context.Background(), env.kube.CoreV1().Secrets(namespace), namespace, "restart-controller-checksum-key")
	if err != nil {
		return checksum.Hasher{}, err
	}
	h, err := checksum.NewHasher(key)
	if err != nil {
		return checksum.Hasher{}, err
	}
	checksumKeys.Store(namespace, h)
	return h, nil
}

// currentChecksum reads a ConfigMap ("configmap") or Secret ("secret") from
// the API server and returns the checksum of the data a reference reads.
func currentChecksum(t *testing.T, kind, ns, name string, keys []string) string {
	t.Helper()
	var sum string
	var err error
	switch kind {
	case "configmap":
		var cm *corev1.ConfigMap
		if cm, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctxFor(t), name, metav1.GetOptions{}); err == nil {
			sum, err = configMapChecksum(cm, keys)
		}
	case "secret":
		var s *corev1.Secret
		if s, err = env.kube.CoreV1().Secrets(ns).Get(ctxFor(t), name, metav1.GetOptions{}); err == nil {
			sum, err = secretChecksum(s, keys)
		}
	default:
		err = fmt.Errorf("unknown source kind %q", kind)
	}
	if err != nil {
		t.Fatalf("checksum of %s: %v", sourceID(kind, ns, name), err)
	}
	return sum
}

// waitApplied waits until the workload's applied checksums annotation (the
// suite's key) holds want for every source named there.
func waitApplied(t *testing.T, gvr schema.GroupVersionResource, ns, name string, want map[string]string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("applied checksums %v on %s %s/%s", want, gvr.Resource, ns, name), func() (bool, error) {
		raw := getWorkload(t, gvr, ns, name).annotations[appliedKey]
		applied := map[string]string{}
		if err := json.Unmarshal([]byte(raw), &applied); err != nil {
			return false, fmt.Errorf("applied checksums %q: %v", raw, err)
		}
		for id, sum := range want {
			if applied[id] != sum {
				return false, fmt.Errorf("applied %s", raw)
			}
		}
		return true, nil
	})
}
