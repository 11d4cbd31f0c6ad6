package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"
)

// fakeNode is a simulated node of a test's own, run by a kwok process of its
// own, so the test decides how the pods on it behave without changing the
// suite's node. kwok (v0.7.0) moves pods through Stages: each has a selector
// (jq expressions over the pod, see sigs.k8s.io/kwok/pkg/utils/expression)
// and a status template applied when it matches. Without Stages in its config
// file kwok uses its "fast" defaults (kustomize/stage/pod/fast): pod-ready
// makes every scheduled pod Running and Ready at once. Here the config holds
// those same Stages, and neverReady adds a selector to pod-ready that leaves
// out pods with a label, plus a Stage that makes those Running but never
// Ready, as a crashing or misconfigured app would be.
//
// kwok reads Stages at start, so changing the behaviour restarts this node's
// kwok. Pods keep their status across that: both pod Stages match only pods
// that have no IP yet, so the change applies to pods started after it.
type fakeNode struct {
	name, dir string
	// stopping asks the supervisor of kwok to stop it; done is closed once
	// it has.
	stopping, done chan struct{}
}

const fakeNodeLabel = "restart-controller.test/node"

// startFakeNode creates a node on which every pod becomes ready, until
// neverReady says otherwise. It is removed when the test ends.
func startFakeNode(t *testing.T, name string) *fakeNode {
	t.Helper()
	n := &fakeNode{name: name, dir: filepath.Join(env.workDir, "node-"+name)}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.start(t, "", "")
	t.Cleanup(func() { n.remove(t) })
	n.create(t)
	return n
}

// neverReady restarts the node's kwok so that pods carrying label key=value
// that start from now on run but never become ready; other pods still do.
func (n *fakeNode) neverReady(t *testing.T, key, value string) {
	t.Helper()
	n.stop()
	n.start(t, key, value)
}

// heal restarts the node's kwok so that every pod starting from now on
// becomes ready. Pods left unready stay so until their workload replaces them.
func (n *fakeNode) heal(t *testing.T) {
	t.Helper()
	n.stop()
	n.start(t, "", "")
}

// podSpec is the suite's podSpec placed on this node.
func (n *fakeNode) podSpec(t *testing.T, fragment string) corev1.PodSpec {
	spec := podSpec(t, fragment)
	spec.NodeSelector = map[string]string{fakeNodeLabel: n.name}
	return spec
}

// start runs this node's kwok, and runs it again should it exit on its
// own: kwok v0.7.0 can die of "concurrent map writes" while it compiles its
// Stages, and a node whose kwok is gone leaves its pods pending. Pods keep
// their status across a restart (see fakeNode).
func (n *fakeNode) start(t *testing.T, key, value string) {
	t.Helper()
	cfg := filepath.Join(n.dir, "kwok.yaml")
	if err := os.WriteFile(cfg, []byte(podStages(key, value)), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.OpenFile(filepath.Join(n.dir, "kwok.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	stopping, done := make(chan struct{}), make(chan struct{})
	n.stopping, n.done = stopping, done
	go func() {
		defer close(done)
		defer logFile.Close()
		for {
			cmd := exec.Command(filepath.Join(env.cluster.BinDir, "kwok"),
				"--kubeconfig="+env.cluster.Kubeconfig,
				"--config="+cfg,
				"--manage-single-node="+n.name,
				"--cidr=10.1.0.1/16",
				"--node-ip=10.1.0.1",
			)
			cmd.Stdout, cmd.Stderr = logFile, logFile
			exited := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				exited <- err
			} else {
				go func() { exited <- cmd.Wait() }()
			}
			select {
			case <-stopping:
				if cmd.Process != nil {
					_ = cmd.Process.Signal(syscall.SIGTERM)
					select {
					case <-exited:
					case <-time.After(10 * time.Second):
						_ = cmd.Process.Kill()
						<-exited
					}
				}
				return
			case err := <-exited:
				fmt.Fprintf(logFile, "e2e: kwok for node %s exited (%v); starting it again\n", n.name, err)
			}
			select {
			case <-stopping:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

func (n *fakeNode) stop() {
	if n.stopping == nil {
		return
	}
	close(n.stopping)
	<-n.done
	n.stopping = nil
}

// create registers the node, lifts the not-ready taint the API server's
// admission adds (no node lifecycle controller runs here to do it), and
// waits for kwok to report it Ready.
func (n *fakeNode) create(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.name,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				fakeNodeLabel:            n.name,
				"kubernetes.io/hostname": n.name,
				"kubernetes.io/os":       "linux",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := env.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", n.name, err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := env.kube.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(cur.Spec.Taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		if len(kept) == len(cur.Spec.Taints) {
			return nil
		}
		cur.Spec.Taints = kept
		_, err = env.kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("removing the not-ready taint of %s: %v", n.name, err)
	}
	waitFor(t, "node "+n.name+" Ready and untainted", func() (bool, error) {
		cur, err := env.kube.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return len(cur.Spec.Taints) == 0, nil
			}
		}
		return false, nil
	})
}

// remove stops kwok and deletes the node and the pods bound to it: without
// a kwok to finish their deletion they would stay Terminating and keep
// their namespace from going away.
func (n *fakeNode) remove(t *testing.T) {
	n.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.kube.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil && !isNotFound(err) {
		t.Logf("deleting node %s: %v", n.name, err)
	}
	pods, err := env.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
	})
	if err != nil {
		t.Logf("listing pods of node %s: %v", n.name, err)
		return
	}
	zero := int64(0)
	for _, p := range pods.Items {
		_ = env.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
}

// podStages is kwok's fast pod Stages (pod-ready, pod-complete, pod-delete of
// kustomize/stage/pod/fast in sigs.k8s.io/kwok v0.7.0), with, when key is
// set, pods labelled key=value kept from pod-ready and sent to
// pod-never-ready instead.
func podStages(key, value string) string {
	exclude, unready := "", ""
	if key != "" {
		label := fmt.Sprintf(`'.metadata.labels[%q]'`, key)
		exclude = fmt.Sprintf("\n    - key: %s\n      operator: NotIn\n      values: [%q]", label, value)
		unready = strings.NewReplacer("LABEL", label, "VALUE", fmt.Sprintf("%q", value)).Replace(neverReadyStage)
	}
	return strings.Replace(fastPodStages, "EXCLUDE", exclude, 1) + unready
}

const fastPodStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.podIP'
      operator: DoesNotExistEXCLUDE
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
      {{ range .spec.readinessGates }}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: {{ .conditionType | Quote }}}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: [Running]
    - key: '.metadata.ownerReferences.[].kind'
      operator: In
      values: [Job]
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state: {terminated: {exitCode: 0, finishedAt: {{ $now | Quote }}, reason: Completed, startedAt: {{ $now | Quote }}}}
      {{ end }}
      phase: Succeeded
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: Exists
  next:
    finalizers: {empty: true}
    delete: true
`

// neverReadyStage runs a pod whose readiness probe never passes: Running,
// containers started, not Ready.
const neverReadyStage = `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-never-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.podIP'
      operator: DoesNotExist
    - key: LABEL
      operator: In
      values: [VALUE]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
      - {lastTransitionTime: {{ $now | Quote }}, status: "False", type: Ready, reason: ContainersNotReady}
      - {lastTransitionTime: {{ $now | Quote }}, status: "False", type: ContainersReady, reason: ContainersNotReady}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        started: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
`

// podReady reports whether a pod is Running with condition Ready True.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// The helper itself: on a node told to keep label health=bad unready, a pod
// with it runs but never becomes ready while one without it does; after
// heal, a new pod with the label becomes ready and the old one stays as it was.
func TestFleetKwokNeverReady(t *testing.T) {
	ns := newNamespace(t)
	node := startFakeNode(t, "kwok-"+ns)
	node.neverReady(t, "health", "bad")
	ctx := ctxFor(t)
	mkPod := func(name string, labels map[string]string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: node.podSpec(t, "")}
		if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *corev1.Pod {
		t.Helper()
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mkPod("bad", map[string]string{"health": "bad"})
	mkPod("good", map[string]string{"health": "good"})
	waitFor(t, "pod good ready, pod bad running", func() (bool, error) {
		return podReady(get("good")) && get("bad").Status.Phase == corev1.PodRunning, nil
	})
	time.Sleep(3 * time.Second) // kwok had every chance to make it ready
	if p := get("bad"); podReady(p) || p.Spec.NodeName != node.name {
		t.Fatalf("pod with health=bad on %s is ready: %+v", p.Spec.NodeName, p.Status.Conditions)
	}

	node.heal(t)
	mkPod("bad-again", map[string]string{"health": "bad"})
	waitFor(t, "a new pod with health=bad ready after heal", func() (bool, error) { return podReady(get("bad-again")), nil })
	if podReady(get("bad")) {
		t.Fatal("heal changed a pod that was already running")
	}
}
