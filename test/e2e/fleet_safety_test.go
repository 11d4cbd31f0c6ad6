package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Fleet safety on the local control plane: health-gated waves, holds, the
// breaker, opt-outs, and holds surviving a SIGKILL and a failover. Each test
// runs a controller of its own with annotation keys of its own; the fleets
// are Deployments of one replica on a node of the test's own (fakeNode),
// whose kwok can keep the pods of restarted workloads from becoming ready.

// safetyKeys are a test controller's annotation keys, fleet-safety ones
// included.
type safetyKeys struct {
	isolatedKeys
	rollout, hold, release, ignore, ignoreSources string
}

func safetyKeysFor(prefix string) safetyKeys {
	return safetyKeys{
		isolatedKeys:  keysFor(prefix),
		rollout:       prefix + ".e2e.example/rollout",
		hold:          prefix + ".e2e.example/hold",
		release:       prefix + ".e2e.example/release",
		ignore:        prefix + ".e2e.example/ignore",
		ignoreSources: prefix + ".e2e.example/ignore-sources",
	}
}

// safetyConfig is examples/config.yaml watching only ns, with the keys, a
// rollout deadline for Deployments, and the given changes.
func safetyConfig(t *testing.T, name, ns string, keys safetyKeys, deadline string, extra func(map[string]interface{})) string {
	return writeConfig(t, name, func(cfg map[string]interface{}) {
		cfg["namespaces"] = []interface{}{ns}
		cfg["annotations"] = map[string]interface{}{
			"optIn": keys.optIn, "appliedChecksums": keys.applied,
			"restartTimestamp": keys.timestamp, "appliedTemplateHash": keys.templateHash,
			"rollout": keys.rollout, "hold": keys.hold, "release": keys.release,
			"ignore": keys.ignore, "ignoreSources": keys.ignoreSources,
		}
		workloads := cfg["workloads"].([]interface{})
		deployments := workloads[0].(map[string]interface{})
		if deployments["resource"] != "deployments" {
			t.Fatalf("examples/config.yaml: workloads[0] is %v", deployments["resource"])
		}
		deployments["rollout"] = map[string]interface{}{"deadline": deadline}
		if extra != nil {
			extra(cfg)
		}
	})
}

// probeLabel marks the pods of a safety fleet, so that fakeNode.neverReady
// can keep them unready.
const probeLabel, probeValue = "fleet-health", "probe"

// safetyFleet is n Deployments of one replica, app-00 to app-NN, reading
// ConfigMap "shared" on the test's node.
type safetyFleet struct {
	ns    string
	keys  safetyKeys
	node  *fakeNode
	names []string
}

func newSafetyFleet(t *testing.T, ns string, keys safetyKeys, node *fakeNode, n int) *safetyFleet {
	t.Helper()
	f := &safetyFleet{ns: ns, keys: keys, node: node}
	createConfigMap(t, ns, "shared", map[string]string{"v": "0"})
	one := int32(1)
	spec := node.podSpec(t, `
containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: shared}}]}]`)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("app-%02d", i)
		f.names = append(f.names, name)
		podLabels := map[string]string{"app": name, probeLabel: probeValue}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}},
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: spec},
			},
		}
		if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// workload is what the tests read of one Deployment.
type workload struct {
	name        string
	replicaSets int // one per pod template: restarts + 1
	stamp       string
	hold        string
	record      rolloutRecord
	available   bool
}

type rolloutRecord struct {
	At      time.Time         `json:"at"`
	Sources map[string]string `json:"sources"`
	Result  string            `json:"result"`
	Reason  string            `json:"reason"`
	Done    *time.Time        `json:"done"`
}

type holdRecord struct {
	Kind, Source, Change, Cause string
}

// read returns every Deployment of the fleet by name.
func (f *safetyFleet) read(t *testing.T) (map[string]workload, error) {
	t.Helper()
	ctx := ctxFor(t)
	list, err := env.kube.AppsV1().Deployments(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	rss, err := env.kube.AppsV1().ReplicaSets(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	perApp := map[string]int{}
	for _, rs := range rss.Items {
		perApp[rs.Labels["app"]]++
	}
	out := map[string]workload{}
	for _, d := range list.Items {
		w := workload{
			name:        d.Name,
			replicaSets: perApp[d.Name],
			stamp:       d.Spec.Template.Annotations[f.keys.timestamp],
			hold:        d.Annotations[f.keys.hold],
			available: d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 1 &&
				d.Status.AvailableReplicas == 1 && d.Status.Replicas == 1,
		}
		if raw := d.Annotations[f.keys.rollout]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &w.record); err != nil {
				return nil, fmt.Errorf("%s: rollout record %q: %w", d.Name, raw, err)
			}
		}
		out[d.Name] = w
	}
	return out, nil
}

func (f *safetyFleet) mustRead(t *testing.T) map[string]workload {
	t.Helper()
	ws, err := f.read(t)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// waitReady waits until every Deployment is recorded by the controller and
// rolled out.
func (f *safetyFleet) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, "every workload recorded and available", func() (bool, error) {
		list, err := env.kube.AppsV1().Deployments(f.ns).List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ws, err := f.read(t)
		if err != nil {
			return false, err
		}
		for _, d := range list.Items {
			if _, ok := d.Annotations[f.keys.applied]; !ok {
				return false, fmt.Errorf("%s not recorded", d.Name)
			}
			if !ws[d.Name].available {
				return false, fmt.Errorf("%s not available: %+v", d.Name, d.Status)
			}
		}
		return len(list.Items) == len(f.names), nil
	})
}

// restarted returns the names of the workloads whose template carries a
// restart, sorted.
func restarted(ws map[string]workload) []string {
	var out []string
	for name, w := range ws {
		if w.stamp != "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// held returns the names of the workloads carrying a hold, sorted, with the
// holds decoded.
func held(t *testing.T, ws map[string]workload) ([]string, map[string]holdRecord) {
	t.Helper()
	var names []string
	holds := map[string]holdRecord{}
	for name, w := range ws {
		if w.hold == "" {
			continue
		}
		var h holdRecord
		if err := json.Unmarshal([]byte(w.hold), &h); err != nil {
			t.Fatalf("%s: hold %q: %v", name, w.hold, err)
		}
		names = append(names, name)
		holds[name] = h
	}
	sort.Strings(names)
	return names, holds
}

// metricEquals waits until the controller's metric (summed over labels) is want.
func metricEquals(t *testing.T, p *controllerProcess, name string, want float64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s = %v", name, want), func() (bool, error) {
		v, err := p.Metric(name)
		if err != nil {
			return false, err
		}
		if v != want {
			return false, fmt.Errorf("%s = %v", name, v)
		}
		return true, nil
	})
}

// stays checks cond for the whole duration: a proof that something does not
// happen, once the controller had every chance to do it.
func stays(t *testing.T, what string, d time.Duration, cond func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := cond(); err != nil {
			fatalf(t, "%s: %v", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func setShared(t *testing.T, f *safetyFleet, v string) {
	t.Helper()
	setConfigMapKey(t, f.ns, "shared", "v", v)
}

const heldMetric = "restart_controller_restarts_held"

// A change whose restarted pods never become ready reaches only the first
// wave: its rollout fails at the deadline, and every other reader is held,
// with a hold on the workload, a RestartHeld Event naming the source and the
// failed workload, and the held gauge exact. A new change of the source
// resumes by starting its own waves over, in the same order: the failed
// workload first. A second bad change therefore reaches that same workload
// again and no other; once the pods are healthy (the fix), the first wave
// completes and the next waves follow until every workload has the fix,
// each of the held ones restarted exactly once.
func TestWaveHaltsWhenRestartedPodsNeverBecomeReady(t *testing.T) {
	const n = 60
	ns := newNamespace(t)
	node := startFakeNode(t, "kwok-"+ns)
	keys := safetyKeysFor("waves")
	f := newSafetyFleet(t, ns, keys, node, n)
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "waves", safetyConfig(t, "waves", ns, keys, "30s", nil),
		"--restart-grace-period", "1s", "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	logTailOnFailure(t, "waves", &p)
	f.waitReady(t)

	// A bad change: restarted pods never become ready.
	node.neverReady(t, probeLabel, probeValue)
	setShared(t, f, "bad-1")
	waitEvent(t, ns, "Deployment", "app-00", "RolloutFailed")
	metricEquals(t, p, heldMetric, n-1)
	ws := f.mustRead(t)
	if got := restarted(ws); len(got) != 1 || got[0] != "app-00" {
		t.Fatalf("restarted %v, want only the first wave [app-00]", got)
	}
	if ws["app-00"].record.Result != "failed" || ws["app-00"].record.Reason != "DeadlineExceeded" {
		t.Fatalf("app-00 rollout record %+v, want failed by DeadlineExceeded", ws["app-00"].record)
	}
	names, holds := held(t, ws)
	if len(names) != n-1 {
		t.Fatalf("%d workloads carry a hold, want %d: %v", len(names), n-1, names)
	}
	change := holds["app-01"].Change
	for _, name := range names {
		h := holds[name]
		if h.Kind != "wave" || h.Source != "configmap/"+ns+"/shared" || h.Change != change || !strings.Contains(h.Cause, "app-00") {
			t.Fatalf("%s: hold %+v", name, h)
		}
	}
	note := waitEvent(t, ns, "Deployment", "app-59", "RestartHeld")
	for _, want := range []string{"configmap/" + ns + "/shared", "app-00", keys.release + "=" + change} {
		if !strings.Contains(note, want) {
			t.Fatalf("RestartHeld note %q does not name %q", note, want)
		}
	}
	// Held means held: the rest of the change stays away while nothing changes.
	stays(t, "nothing more restarted while held", 5*time.Second, func() error {
		if got := restarted(f.mustRead(t)); len(got) != 1 {
			return fmt.Errorf("restarted %v", got)
		}
		return nil
	})

	// A second bad change restarts its first wave, the same workload, and
	// again nothing else: the held ones are held for the new change.
	setShared(t, f, "bad-2")
	waitFor(t, "the holds to move to the second change", func() (bool, error) {
		names, holds := held(t, f.mustRead(t))
		if len(names) != n-1 {
			return false, fmt.Errorf("%d holds", len(names))
		}
		for _, name := range names {
			if holds[name].Change == change {
				return false, fmt.Errorf("%s still held for the first change", name)
			}
		}
		return true, nil
	})
	metricEquals(t, p, heldMetric, n-1)
	ws = f.mustRead(t)
	if got := restarted(ws); len(got) != 1 || ws["app-00"].replicaSets != 3 {
		t.Fatalf("after the second bad change: restarted %v, app-00 has %d ReplicaSets (want 3: created, bad-1, bad-2)", got, ws["app-00"].replicaSets)
	}

	// The fix: pods become ready again. Waves start over and go through.
	node.heal(t)
	started := time.Now()
	setShared(t, f, "fixed")
	waitFor(t, "every workload restarted with the fix and available", func() (bool, error) {
		ws, err := f.read(t)
		if err != nil {
			return false, err
		}
		for _, name := range f.names {
			w := ws[name]
			want := 2
			if name == "app-00" {
				want = 4
			}
			if w.replicaSets > want {
				t.Fatalf("%s restarted more than once for the fix: %d ReplicaSets, want %d", name, w.replicaSets, want)
			}
			if w.replicaSets != want || !w.available || w.record.Result != "complete" {
				return false, fmt.Errorf("%s: %d ReplicaSets (want %d), available %v, rollout %q", name, w.replicaSets, want, w.available, w.record.Result)
			}
		}
		return true, nil
	})
	t.Logf("fix rolled out to %d workloads in %s", n, time.Since(started).Round(time.Second))
	ws = f.mustRead(t)
	checkWaves(t, f.names, ws)
	if names, _ := held(t, ws); len(names) != 0 {
		t.Fatalf("holds left after the fix: %v", names)
	}
	metricEquals(t, p, heldMetric, 0)
}

// checkWaves proves health gating from the rollout records: in name order,
// the workloads of each wave (1, 2, 4, ... wide) were restarted only after
// every rollout of the waves before them had completed.
func checkWaves(t *testing.T, names []string, ws map[string]workload) {
	t.Helper()
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var lastDone time.Time
	for start, size := 0, 1; start < len(sorted); start, size = start+size, size*2 {
		end := min(start+size, len(sorted))
		var waveDone time.Time
		for _, name := range sorted[start:end] {
			r := ws[name].record
			if r.Done == nil {
				t.Fatalf("%s: rollout not done: %+v", name, r)
			}
			if r.At.Before(lastDone) {
				t.Fatalf("%s (wave of %d from %s) restarted at %s, before the previous wave completed at %s",
					name, size, sorted[start], r.At.Format(time.RFC3339Nano), lastDone.Format(time.RFC3339Nano))
			}
			if r.Done.After(waveDone) {
				waveDone = *r.Done
			}
		}
		lastDone = waveDone
	}
}

// A healthy change of a source read by 60 workloads restarts each exactly
// once (one new ReplicaSet each), in waves that each wait for the previous
// one's rollouts, and completes within a bound.
func TestWaveHealthyFleetRestartsEachOnce(t *testing.T) {
	const n = 60
	ns := newNamespace(t)
	node := startFakeNode(t, "kwok-"+ns)
	keys := safetyKeysFor("healthy")
	f := newSafetyFleet(t, ns, keys, node, n)
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "healthy", safetyConfig(t, "healthy", ns, keys, "1m", nil),
		"--restart-grace-period", "1s", "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	logTailOnFailure(t, "healthy", &p)
	f.waitReady(t)

	started := time.Now()
	setShared(t, f, "1")
	waitFor(t, "every workload restarted once and available", func() (bool, error) {
		ws, err := f.read(t)
		if err != nil {
			return false, err
		}
		for _, name := range f.names {
			w := ws[name]
			if w.replicaSets > 2 {
				t.Fatalf("%s restarted more than once: %d ReplicaSets", name, w.replicaSets)
			}
			if w.replicaSets != 2 || !w.available || w.record.Result != "complete" {
				return false, fmt.Errorf("%s: %d ReplicaSets, available %v, rollout %q", name, w.replicaSets, w.available, w.record.Result)
			}
		}
		return true, nil
	})
	took := time.Since(started)
	ws := f.mustRead(t)
	checkWaves(t, f.names, ws)
	const bound = 75 * time.Second
	t.Logf("healthy fleet: %d workloads restarted once each, in waves of 1, 2, 4, 8, 16, 29, in %s", n, took.Round(100*time.Millisecond))
	if took > bound {
		t.Fatalf("the waves took %s, more than %s", took, bound)
	}
	if v, err := p.Metric("deployment_restart_controller_deployment_restarts_total"); err != nil || v != n {
		t.Fatalf("restarts counted %v (%v), want %d", v, err, n)
	}
	metricEquals(t, p, "restart_controller_rollouts_total", n)
	metricEquals(t, p, heldMetric, 0)
}

// A source changed every 2 s restarts its reader at most the breaker's
// budget (3 within 20 s) of times, then the reader is held, also after the
// window has passed, for as long as the changes go on; once they stop for
// the quiet time (5 s), the merged changes restart it exactly once more.
func TestBreakerHoldsAFlappingSource(t *testing.T) {
	ns := newNamespace(t)
	node := startFakeNode(t, "kwok-"+ns)
	keys := safetyKeysFor("breaker")
	f := newSafetyFleet(t, ns, keys, node, 1)
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "breaker", safetyConfig(t, "breaker", ns, keys, "1m", func(cfg map[string]interface{}) {
		cfg["breaker"] = map[string]interface{}{"budget": 3, "window": "20s", "quiet": "5s"}
	}), "--restart-grace-period", "1s", "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	logTailOnFailure(t, "breaker", &p)
	f.waitReady(t)

	const period, flapping = 2 * time.Second, 30 * time.Second
	var last time.Time
	heldSeen := false
	for i, end := 1, time.Now().Add(flapping); time.Now().Before(end); i++ {
		// Taken before the update is sent: the controller may see its
		// event before the update call returns here, and times the quiet
		// from that.
		last = time.Now()
		setShared(t, f, fmt.Sprint(i))
		time.Sleep(period)
		w := f.mustRead(t)["app-00"]
		if restarts := w.replicaSets - 1; restarts > 3 {
			t.Fatalf("restarted %d times while the source kept changing, budget 3", restarts)
		}
		if w.hold != "" {
			heldSeen = true
		}
	}
	if !heldSeen {
		t.Fatal("never held while the source kept changing")
	}
	note := waitEvent(t, ns, "Deployment", "app-00", "RestartHeld")
	if !strings.Contains(note, "restarted 3 times within 20s") {
		t.Fatalf("RestartHeld note %q", note)
	}
	if v, err := p.Metric(heldMetric); err != nil || v != 1 {
		t.Fatalf("%s = %v (%v) while flapping, want 1", heldMetric, v, err)
	}

	// The changes stop: one restart after the quiet time, then no more.
	waitFor(t, "the restart after the source stayed still", func() (bool, error) {
		w := f.mustRead(t)["app-00"]
		if w.replicaSets != 5 || w.hold != "" {
			return false, fmt.Errorf("%d ReplicaSets, hold %q", w.replicaSets, w.hold)
		}
		return true, nil
	})
	w := f.mustRead(t)["app-00"]
	if quiet := w.record.At.Sub(last); quiet < 5*time.Second {
		t.Fatalf("restarted %s after the last change, before the quiet time of 5s", quiet)
	}
	metricEquals(t, p, heldMetric, 0)
	stays(t, "no further restart", 8*time.Second, func() error {
		if w := f.mustRead(t)["app-00"]; w.replicaSets != 5 {
			return fmt.Errorf("%d ReplicaSets, want 5 (created, 3 restarts, 1 after the changes stopped)", w.replicaSets)
		}
		return nil
	})
}

// A held wave survives the controller: the leader is SIGKILLed while the
// first wave's rollout is under way, and the standby that takes over follows
// that rollout from its record to its deadline and holds the rest; then the
// new leader is SIGKILLed too and a fresh process takes over. Neither
// releases or restarts anything held. Finally the operator releases the
// change with the annotation the Event names, and the held workloads go on.
func TestWaveHoldSurvivesKillAndFailover(t *testing.T) {
	const n = 20
	step := progress(t)
	ns := newNamespace(t)
	node := startFakeNode(t, "kwok-"+ns)
	keys := safetyKeysFor("failsafe")
	f := newSafetyFleet(t, ns, keys, node, n)
	configFile := safetyConfig(t, "failsafe", ns, keys, "30s", func(cfg map[string]interface{}) {
		cfg["leaderElection"] = map[string]interface{}{
			"enabled": true, "namespace": ns, "leaseName": "restart-controller",
			"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms",
		}
	})
	ctx := ctxFor(t)
	args := []string{"--restart-grace-period", "1s", "--restart-check-period", "100"}
	replicas := map[string]*controllerProcess{}
	start := func(id string) {
		t.Helper()
		p, err := env.startController(ctx, "failsafe-"+id, configFile, append(args, "--leader-election-identity", id)...)
		if err != nil {
			t.Fatal(err)
		}
		replicas[id] = p
		t.Cleanup(p.Stop)
		logTailOnFailure(t, id, &p)
	}
	holder := func() string {
		lease, err := env.kube.CoordinationV1().Leases(ns).Get(ctx, "restart-controller", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	start("a")
	start("b")
	waitFor(t, "a leader", func() (bool, error) { return holder() != "", nil })
	f.waitReady(t)
	step("fleet ready")

	node.neverReady(t, probeLabel, probeValue)
	setShared(t, f, "bad")
	waitFor(t, "the first wave restarted", func() (bool, error) {
		if got := restarted(f.mustRead(t)); len(got) != 1 {
			return false, fmt.Errorf("restarted %v", got)
		}
		return true, nil
	})
	step("first wave restarted")
	// SIGKILL inside the first wave's rollout, before its deadline.
	first := holder()
	replicas[first].Kill()
	standby := "a"
	if first == "a" {
		standby = "b"
	}
	waitFor(t, "the standby to take over", func() (bool, error) { return holder() == standby, nil })
	step("standby took over")
	waitEvent(t, ns, "Deployment", "app-00", "RolloutFailed")
	step("rollout failed")
	metricEquals(t, replicas[standby], heldMetric, n-1)
	step("standby holds the rest")
	ws := f.mustRead(t)
	if got := restarted(ws); len(got) != 1 {
		t.Fatalf("restarted %v after the failover, want only the first wave", got)
	}
	names, holds := held(t, ws)
	if len(names) != n-1 {
		t.Fatalf("%d holds, want %d", len(names), n-1)
	}
	change := holds[names[0]].Change

	// SIGKILL the new leader as well; a fresh process takes over.
	replicas[standby].Kill()
	start("c")
	waitFor(t, "the fresh process to take over", func() (bool, error) { return holder() == "c", nil })
	step("fresh process took over")
	metricEquals(t, replicas["c"], heldMetric, n-1)
	step("fresh process holds the rest")
	stays(t, "the fresh leader releases nothing and restarts nothing", 10*time.Second, func() error {
		ws, err := f.read(t)
		if err != nil {
			return err
		}
		if got := restarted(ws); len(got) != 1 {
			return fmt.Errorf("restarted %v", got)
		}
		if names, _ := held(t, ws); len(names) != n-1 {
			return fmt.Errorf("%d holds", len(names))
		}
		return nil
	})
	if v, err := replicas["c"].Metric("deployment_restart_controller_deployment_restarts_total"); err != nil || v != 0 {
		t.Fatalf("the fresh leader restarted %v workloads (%v)", v, err)
	}

	// The operator looks, finds the pods were unhealthy for another reason
	// (fixed now), and releases the change as the Event says.
	node.heal(t)
	step("healed; releasing")
	updateConfigMap(t, ns, "shared", func(cm *corev1.ConfigMap) {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[keys.release] = change
	})
	waitFor(t, "the held workloads restarted once each and available", func() (bool, error) {
		ws, err := f.read(t)
		if err != nil {
			return false, err
		}
		for _, name := range f.names[1:] {
			w := ws[name]
			if w.replicaSets > 2 {
				t.Fatalf("%s restarted more than once: %d ReplicaSets", name, w.replicaSets)
			}
			if w.replicaSets != 2 || !w.available || w.hold != "" {
				return false, fmt.Errorf("%s: %d ReplicaSets, available %v, hold %q", name, w.replicaSets, w.available, w.hold)
			}
		}
		return true, nil
	})
	if w := f.mustRead(t)["app-00"]; w.replicaSets != 2 {
		t.Fatalf("app-00 restarted again by the release: %d ReplicaSets", w.replicaSets)
	}
	metricEquals(t, replicas["c"], heldMetric, 0)
}

// A source annotated to be ignored restarts nothing when it changes (its
// readers reload it themselves), and a workload can name sources it ignores;
// either way the change is recorded, and other sources still restart.
func TestOptOutSourceAndWorkload(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	const ignoreKey, ignoreSourcesKey = "com.xing.deployment-restart.ignore", "com.xing.deployment-restart.ignore-sources"
	createConfigMap(t, ns, "app", map[string]string{"k": "1"})
	createConfigMap(t, ns, "reloaded", map[string]string{"k": "1"})
	updateConfigMap(t, ns, "reloaded", func(cm *corev1.ConfigMap) {
		cm.Annotations = map[string]string{ignoreKey: "true"}
	})
	createConfigMap(t, ns, "flags", map[string]string{"k": "1"})
	reads := podSpec(t, `
containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app}}, {configMapRef: {name: reloaded}}, {configMapRef: {name: flags}}]}]`)
	createDeployment(t, ns, "web", reads, workloadOptions{optIn: true, replicas: 1})
	createDeployment(t, ns, "worker", reads, workloadOptions{optIn: true, replicas: 1})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), "worker", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Annotations[ignoreSourcesKey] = "configmap/flags, other"
		_, err = env.kube.AppsV1().Deployments(ns).Update(ctxFor(t), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitRecorded(t, deploymentsGVR, ns, "web")
	waitRecorded(t, deploymentsGVR, ns, "worker")
	// Their first ReplicaSets exist before "before" is taken: the deployment
	// controller may create them after the checksums are recorded.
	waitDeploymentRestarts(t, ns, "web", 0)
	waitDeploymentRestarts(t, ns, "worker", 0)
	before := map[string]workloadState{"web": getWorkload(t, deploymentsGVR, ns, "web"), "worker": getWorkload(t, deploymentsGVR, ns, "worker")}

	// The ignored source changes: recorded on both, restarted on neither.
	setConfigMapKey(t, ns, "reloaded", "k", "2")
	reloaded := currentChecksum(t, "configmap", ns, "reloaded", nil)
	for _, name := range []string{"web", "worker"} {
		waitApplied(t, deploymentsGVR, ns, name, map[string]string{sourceID("configmap", ns, "reloaded"): reloaded})
		assertNotRestarted(t, deploymentsGVR, ns, name, before[name])
	}
	// flags changes: web restarts, worker (which ignores flags) records.
	setConfigMapKey(t, ns, "flags", "k", "2")
	flags := currentChecksum(t, "configmap", ns, "flags", nil)
	waitDeploymentRestarts(t, ns, "web", 1)
	waitApplied(t, deploymentsGVR, ns, "worker", map[string]string{sourceID("configmap", ns, "flags"): flags})
	assertNotRestarted(t, deploymentsGVR, ns, "worker", before["worker"])
	// The witness: app restarts both, so a restart of worker was possible.
	setConfigMapKey(t, ns, "app", "k", "2")
	waitDeploymentRestarts(t, ns, "web", 2)
	waitDeploymentRestarts(t, ns, "worker", 1)
}
