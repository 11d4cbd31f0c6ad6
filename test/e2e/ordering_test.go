package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// suiteKeys are the annotation keys of examples/config.yaml, which the
// suite's controller uses.
var suiteKeys = isolatedKeys{
	optIn:        optInKey,
	applied:      appliedKey,
	timestamp:    timestampKey,
	templateHash: "com.xing.deployment-restart.applied-template-hash",
}

// createKeyedDeployment creates an opted-in Deployment without pods (only its
// template matters) for the controller using keys.
func createKeyedDeployment(t *testing.T, ns, name string, spec corev1.PodSpec, keys isolatedKeys) {
	t.Helper()
	zero := int32(0)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

// keyedState is a Deployment as the controller using keys left it.
type keyedState struct {
	applied     map[string]string // nil until recorded
	restartedAt string
	deployment  *appsv1.Deployment
}

func readKeyed(t *testing.T, ns, name string, keys isolatedKeys) (keyedState, error) {
	d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		return keyedState{}, err
	}
	s := keyedState{restartedAt: d.Spec.Template.Annotations[keys.timestamp], deployment: d}
	if raw, ok := d.Annotations[keys.applied]; ok {
		if err := json.Unmarshal([]byte(raw), &s.applied); err != nil {
			return s, fmt.Errorf("applied checksums %q: %v", raw, err)
		}
	}
	return s, nil
}

// waitKeyedApplied waits until the Deployment's applied checksums hold want
// for every source named there, and returns its state then.
func waitKeyedApplied(t *testing.T, ns, name string, keys isolatedKeys, want map[string]string) keyedState {
	t.Helper()
	var s keyedState
	waitFor(t, fmt.Sprintf("applied checksums %v on deployment %s/%s", want, ns, name), func() (bool, error) {
		var err error
		if s, err = readKeyed(t, ns, name, keys); err != nil {
			return false, err
		}
		for id, sum := range want {
			if got, ok := s.applied[id]; !ok || got != sum {
				return false, fmt.Errorf("applied %v", s.applied)
			}
		}
		return true, nil
	})
	return s
}

// replicaSetsOf waits until the deployment controller has seen the
// Deployment's latest template, then returns its number of ReplicaSets: one,
// plus one per restart.
func replicaSetsOf(t *testing.T, ns, name string) int {
	t.Helper()
	ctx := ctxFor(t)
	var n int
	waitFor(t, fmt.Sprintf("deployment controller to observe %s/%s", ns, name), func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration != d.Generation {
			return false, fmt.Errorf("observed generation %d of %d", d.Status.ObservedGeneration, d.Generation)
		}
		rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		n = len(rss.Items)
		return true, nil
	})
	return n
}

// orderingWitness proves that a controller has taken every decision due for
// changes of sources of one kind written before: it is a Deployment of its
// own reading a source of its own. A change of that source written after the
// step's writes returned reaches the controller after theirs (the events of
// one kind come in order, through one informer), so the grace period it opens
// ends after every grace period they opened or fell into; and the workloads
// reading those sources were queued for the ends of those. Once the witness
// is restarted for its change, the decisions for the step have been taken: a
// workload not restarted by then was not restarted by decision.
//
// The witness's change must open a grace period, not fall into one still
// open for its source: then it could end before the step's. A restart of the
// witness happens once its source's grace period is over, so every change
// after the first restart opens a new one; the first change is made at once,
// to close the grace period that the source's creation opened, unless the
// source existed before the controller started.
//
// What it cannot order: events of another kind (Secrets and ConfigMaps have
// informers of their own, hence a witness per kind); a reconcile that failed
// and waits for a retry with backoff; and changes that reach the controller
// in one relist after a broken watch (delivered together, not in write
// order). So a subject whose decision writes something is waited for on
// that. A gap in the order can only hide a wrong restart, never fail a test
// whose subjects behave.
type orderingWitness struct {
	ns, kind, name string
	keys           isolatedKeys
	changes        int
	restartedAt    string // the witness's restart timestamp after its latest change
	waiting        bool   // a change not waited for yet
}

// newOrderingWitness is a ConfigMap witness for the suite's controller. It
// returns once the witness is recorded, its first change made.
func newOrderingWitness(t *testing.T, ns string) *orderingWitness {
	t.Helper()
	w := newKeyedWitness(t, ns, "configmap", suiteKeys)
	w.wait(t)
	w.change(t) // closes the grace period of the source's creation
	return w
}

// newKeyedWitness creates a witness for sources of kind ("configmap" or
// "secret") for the controller using keys; wait waits until it is recorded.
func newKeyedWitness(t *testing.T, ns, kind string, keys isolatedKeys) *orderingWitness {
	t.Helper()
	w := &orderingWitness{ns: ns, kind: kind, name: "ordering-witness-" + kind, keys: keys, waiting: true}
	var fragment string
	switch kind {
	case "configmap":
		createConfigMap(t, ns, w.name, map[string]string{"n": "0"})
		fragment = `volumes: [{name: v, configMap: {name: ` + w.name + `}}]`
	case "secret":
		createSecret(t, ns, w.name, map[string]string{"n": "0"})
		fragment = `volumes: [{name: v, secret: {secretName: ` + w.name + `}}]`
	default:
		t.Fatalf("no ordering witness for kind %q", kind)
	}
	createKeyedDeployment(t, ns, w.name, podSpec(t, fragment), keys)
	return w
}

// change changes the witness's source; call it once every write it is to
// order has returned, and once the previous change was waited for.
func (w *orderingWitness) change(t *testing.T) {
	t.Helper()
	if w.waiting && w.changes > 0 {
		t.Fatal("ordering witness changed again before its previous change was acted on")
	}
	w.changes++
	w.waiting = true
	if w.kind == "secret" {
		setSecretKey(t, w.ns, w.name, "n", fmt.Sprint(w.changes))
	} else {
		setConfigMapKey(t, w.ns, w.name, "n", fmt.Sprint(w.changes))
	}
}

// wait waits until the controller has acted on the witness's latest change
// (or recorded it, before any change): its applied checksum is that of its
// source's current data, and after a change its template has a new restart
// timestamp, written by the same patch.
func (w *orderingWitness) wait(t *testing.T) {
	t.Helper()
	want := map[string]string{sourceID(w.kind, w.ns, w.name): currentChecksum(t, w.kind, w.ns, w.name, nil)}
	s := waitKeyedApplied(t, w.ns, w.name, w.keys, want)
	if restarted := s.restartedAt != w.restartedAt; restarted != (w.changes > 0) {
		t.Fatalf("ordering witness %s/%s: restart timestamp %q -> %q after %d change(s)", w.ns, w.name, w.restartedAt, s.restartedAt, w.changes)
	}
	w.restartedAt = s.restartedAt
	w.waiting = false
}

// after changes the witness's source and waits until the controller restarted
// the witness for that change: every decision due for earlier changes of
// sources of its kind has been taken by then.
func (w *orderingWitness) after(t *testing.T) {
	t.Helper()
	if w.waiting {
		w.wait(t)
	}
	w.change(t)
	w.wait(t)
}
