package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// When restarts may happen: restart windows and minimum intervals. Restarts
// are counted as pod-template changes (ReplicaSets, ControllerRevisions).

const (
	windowKey      = "com.xing.deployment-restart.window"
	minIntervalKey = "com.xing.deployment-restart.min-interval"
	waitingMetric  = "restart_controller_restarts_waiting"
)

// windowOpening is the first whole minute at least lead from now, and a
// restart window that opens then (daily, in zone) for two minutes: five
// cron fields in that zone, as an operator writes them.
func windowOpening(t *testing.T, lead time.Duration, zone string) (time.Time, map[string]interface{}) {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	opens := time.Now().Add(lead).Truncate(time.Minute).Add(time.Minute).In(loc)
	return opens, map[string]interface{}{"name": "soon", "schedule": fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()),
		"duration": "2m", "timeZone": zone}
}

// A change outside a workload's restart window restarts nothing until the
// window opens, and then exactly once, with every change merged meanwhile:
// the wait is derived from the objects and the clock, so a controller
// killed and replaced while it waits neither forgets nor rushes it. It is
// a wait, not a hold (a Normal Event, the waiting gauge, no hold), and
// explain shows it with the opening, in the window's time zone. Another
// reader of the same source, without a window, restarts at once.
func TestRestartWindowWaitsThroughSIGKILL(t *testing.T) {
	t.Parallel()
	opens, window := windowOpening(t, 100*time.Second, "Asia/Kolkata")
	c := newCell(t, sigkill, "window", "60s", "1", func(cfg map[string]interface{}) {
		cfg["annotations"].(map[string]interface{})["window"] = windowKey
		cfg["restartWindows"] = []interface{}{window}
	})
	f := newSafetyFleet(t, c.ns, c.keys, c.node, 2)
	annotate(t, c.ns, "app-00", windowKey, "soon")
	c.start()
	f.waitReady(t)

	setShared(t, f, "1")
	waitFor(t, "app-01, without a window, restarted", func() (bool, error) {
		return f.mustRead(t)["app-01"].replicaSets == 2, nil
	})
	waitEventNote(t, c.ns, "app-00", "RestartWaiting", "Restart due, and waits: waits for its restart window soon, which opens at "+
		opens.Format(time.RFC3339))
	metricEquals(t, c.leader(), waitingMetric, 1)
	if ws := f.mustRead(t); ws["app-00"].replicaSets != 1 || ws["app-00"].hold != "" {
		t.Fatalf("app-00 waiting for its window: %+v, want not restarted and no hold", ws["app-00"])
	}
	out := runCLI(t, "explain", "--kubeconfig", env.cluster.Kubeconfig, "--config", c.configFile, "-n", c.ns, "deploy/app-00")
	if want := "wait\n  - waits for its restart window soon, which opens at " + opens.Format(time.RFC3339); !strings.Contains(out.stdout, want) {
		t.Fatalf("explain:\n%s\nwant %q", out.stdout, want)
	}

	setShared(t, f, "2") // merged into the one restart when the window opens
	c.disrupt()
	stays(t, "app-00 not restarted before its window opens", time.Until(opens.Add(-2*time.Second)), func() error {
		if n := f.mustRead(t)["app-00"].replicaSets; n != 1 {
			return fmt.Errorf("app-00 has %d ReplicaSets before %s", n, opens.Format(time.RFC3339))
		}
		return nil
	})
	waitFor(t, "app-00 restarted once its window opened", func() (bool, error) {
		return f.mustRead(t)["app-00"].replicaSets == 2, nil
	})
	stays(t, "app-00 restarted exactly once", 5*time.Second, func() error {
		if w := f.mustRead(t)["app-00"]; w.replicaSets != 2 {
			return fmt.Errorf("%d ReplicaSets", w.replicaSets)
		}
		return nil
	})
	cm, err := env.kube.CoreV1().ConfigMaps(c.ns).Get(ctxFor(t), "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := configMapChecksumIn(c.ns, cm, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "app-00 recorded the last change", func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(c.ns).Get(ctxFor(t), "app-00", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		applied := map[string]string{}
		if err := json.Unmarshal([]byte(d.Annotations[c.keys.applied]), &applied); err != nil {
			return false, err
		}
		if got := applied[sourceID("configmap", c.ns, "shared")]; got != want {
			return false, fmt.Errorf("applied %v, want %s", applied, want)
		}
		return true, nil
	})
	metricEquals(t, c.leader(), waitingMetric, 0)
}

// A reader waiting for its window does not hold back the waves of the
// other readers of the same change: they restart, wave after wave, while it
// waits; it takes no place meanwhile.
func TestWaitingReaderDoesNotHoldBackTheWaves(t *testing.T) {
	t.Parallel()
	_, window := windowOpening(t, 3*time.Hour, "UTC") // far: it stays closed
	ns := newNamespace(t)
	node := startFakeNode(t, "kwok-"+ns)
	keys := safetyKeysFor("waves")
	f := newSafetyFleet(t, ns, keys, node, 8)
	annotate(t, ns, "app-00", windowKey, "soon") // first in the waves' order
	config := safetyConfig(t, "waiting-waves", ns, keys, "1m", func(cfg map[string]interface{}) {
		cfg["annotations"].(map[string]interface{})["window"] = windowKey
		cfg["restartWindows"] = []interface{}{window}
	})
	p, err := env.startController(ctxFor(t), "waiting-waves", config, "--restart-grace-period", "1s", "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	logTailOnFailure(t, "waiting-waves", &p)
	f.waitReady(t)

	setShared(t, f, "1")
	waitFor(t, "the seven readers without a window restarted, in waves", func() (bool, error) {
		ws, err := f.read(t)
		if err != nil {
			return false, err
		}
		for _, name := range f.names[1:] {
			if w := ws[name]; w.replicaSets != 2 || !w.available {
				return false, fmt.Errorf("%s: %d ReplicaSets, available %v", name, w.replicaSets, w.available)
			}
		}
		return true, nil
	})
	ws := f.mustRead(t)
	checkWaves(t, f.names[1:], ws)
	if w := ws["app-00"]; w.replicaSets != 1 || w.hold != "" {
		t.Fatalf("app-00, waiting for its window: %+v", w)
	}
	metricEquals(t, p, waitingMetric, 1)
	metricEquals(t, p, heldMetric, 0)
}

// A minimum interval, for a Deployment, a StatefulSet and a DaemonSet: a
// change restarts at once (nothing restarted them before); the changes
// inside the interval that follows give one restart, when it ends.
func TestMinIntervalMergesChanges(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createConfigMap(t, ns, "conf", map[string]string{"k": "0"})
	const interval = 30 * time.Second
	opts := workloadOptions{optIn: true}
	meta := func(name string) metav1.ObjectMeta {
		m := objectMeta(name, opts)
		m.Annotations[minIntervalKey] = interval.String()
		return m
	}
	spec := podSpec(t, `volumes: [{name: v, configMap: {name: conf}}]`)
	template := func(name string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec}
	}
	one := int32(1)
	ctx := ctxFor(t)
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labelsFor("web")}, Template: template("web")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{
		Replicas: &one, ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labelsFor("db")}, Template: template("db")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labelsFor("agent")}, Template: template("agent")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id := sourceID("configmap", ns, "conf")
	waitRecorded(t, deploymentsGVR, ns, "web", id)
	waitRecorded(t, statefulSetsGVR, ns, "db", id)
	waitRecorded(t, daemonSetsGVR, ns, "agent", id)
	names := []string{"web", "db", "agent"}

	setConfigMapKey(t, ns, "conf", "k", "1")
	waitFor(t, "each restarted once for the first change", func() (bool, error) {
		return templatesAre(t, ns, names, 2)
	})
	first := time.Now()
	setConfigMapKey(t, ns, "conf", "k", "2")
	time.Sleep(3 * time.Second) // a second change, later inside the interval
	setConfigMapKey(t, ns, "conf", "k", "3")
	// explain names the wait and its end (decision/timing.go's reason).
	out := runCLI(t, "explain", "--kubeconfig", env.cluster.Kubeconfig, "--config", filepath.Join(env.repoRoot, "examples", "presets", "xing.yaml"),
		"-n", ns, "deploy/web")
	if want := "its minimum interval is " + interval.String() + " since its last restart at "; !strings.Contains(out.stdout, want) ||
		!strings.Contains(out.stdout, "next restart not before ") {
		t.Fatalf("explain during the interval:\n%s\nwant %q and its end", out.stdout, want)
	}
	stays(t, "no restart inside the interval", time.Until(first.Add(interval-5*time.Second)), func() error {
		ok, err := templatesAre(t, ns, names, 2)
		if !ok {
			return fmt.Errorf("restarted inside the minimum interval: %w", err)
		}
		return nil
	})
	waitFor(t, "each restarted once more when its interval ended", func() (bool, error) {
		return templatesAre(t, ns, names, 3)
	})
	stays(t, "the changes merged into one restart", 5*time.Second, func() error {
		ok, err := templatesAre(t, ns, names, 3)
		if !ok {
			return err
		}
		return nil
	})
}

// templatesAre reports whether each named workload of ns has had n pod
// templates (1 + its restarts): ReplicaSets of a Deployment,
// ControllerRevisions of a StatefulSet or a DaemonSet. More is a failure.
func templatesAre(t *testing.T, ns string, names []string, n int) (bool, error) {
	t.Helper()
	ctx := ctxFor(t)
	count := map[string]int{}
	rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, rs := range rss.Items {
		for _, o := range rs.OwnerReferences {
			count[o.Name]++
		}
	}
	revs, err := env.kube.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, r := range revs.Items {
		for _, o := range r.OwnerReferences {
			count[o.Name]++
		}
	}
	for _, name := range names {
		if count[name] > n {
			t.Fatalf("%s has %d pod templates, want at most %d: restarted too often", name, count[name], n)
		}
		if count[name] != n {
			return false, fmt.Errorf("%s has %d pod templates, want %d", name, count[name], n)
		}
	}
	return true, nil
}

// A window annotation that names no window is said in a Warning Event, and
// the workload restarts on changes as if it named none: never silently
// never.
func TestUnknownWindowRestartsAndWarns(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createConfigMap(t, ns, "conf", map[string]string{"k": "0"})
	opts := workloadOptions{optIn: true}
	createDeployment(t, ns, "web", podSpec(t, `volumes: [{name: v, configMap: {name: conf}}]`), opts)
	annotate(t, ns, "web", windowKey, "nihgts")
	waitRecorded(t, deploymentsGVR, ns, "web", sourceID("configmap", ns, "conf"))
	setConfigMapKey(t, ns, "conf", "k", "1")
	waitDeploymentRestarts(t, ns, "web", 1)
	waitEventNote(t, ns, "web", "InvalidAnnotation", `the annotation `+windowKey+` names no restart window: "nihgts"`)
}
