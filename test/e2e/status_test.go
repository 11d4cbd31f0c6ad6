package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/status"
)

// createOwn creates a Deployment of one replica on the node, opted in with
// the keys, reading the ConfigMap of its own name; its pods carry no probe
// label, so they become ready whatever the node does to the fleet's.
func createOwn(t *testing.T, ns string, keys safetyKeys, node *fakeNode, name string, annotations map[string]string) {
	t.Helper()
	createConfigMap(t, ns, name, map[string]string{"v": "0"})
	one := int32(1)
	meta := metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}}
	for k, v := range annotations {
		meta.Annotations[k] = v
	}
	d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: node.podSpec(t, fmt.Sprintf(`
containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: %s}}]}]`, name))},
	}}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRestarts waits until the workload has had n restarts, recorded and
// rolled out.
func waitRestarts(t *testing.T, f *safetyFleet, name string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s restarted %d times and available", name, n), func() (bool, error) {
		w := f.mustRead(t)[name]
		if w.replicaSets > n+1 {
			t.Fatalf("%s restarted %d times, want %d", name, w.replicaSets-1, n)
		}
		if w.replicaSets != n+1 || !w.available {
			return false, fmt.Errorf("%d ReplicaSets, available %v", w.replicaSets, w.available)
		}
		return true, nil
	})
}

// statusOf runs status -A on the cell's config, as JSON.
func statusOf(t *testing.T, c *cell, args ...string) (*status.Report, cliResult) {
	t.Helper()
	r := runCLI(t, append([]string{"status", "-A", "--kubeconfig", env.cluster.Kubeconfig, "--config", c.configFile, "-o", "json"}, args...)...)
	var rep status.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status -o json: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", err, r.code, r.stdout, r.stderr)
	}
	return &rep, r
}

// explainDecision is explain's decision on a Deployment of the cell.
func explainDecision(t *testing.T, c *cell, name string) explain.Decision {
	t.Helper()
	r := runCLI(t, "explain", "--kubeconfig", env.cluster.Kubeconfig, "--config", c.configFile, "-n", c.ns, "-o", "json", "deploy/"+name)
	var rep explain.WorkloadReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("explain deploy/%s -o json: %v (exit %d)\n%s\n%s", name, err, r.code, r.stdout, r.stderr)
	}
	return rep.Decision
}

// On the local cluster, with one fleet-wide change held after a failed
// rollout, one breaker hold, one restart waiting for its window and one for
// its minimum interval, status -A shows each with its reason and end, the
// change with its waves, cause and release, the leader and its metrics,
// and agrees with explain on every workload; the controller then stopped,
// it answers the same from the objects alone.
func TestStatusShowsHoldsAndWaits(t *testing.T) {
	t.Parallel()
	opens, window := windowOpening(t, 3*time.Hour, "Asia/Kolkata") // stays closed
	c := newCell(t, oneProcess, "status", "20s", "1", func(cfg map[string]interface{}) {
		annotations := cfg["annotations"].(map[string]interface{})
		annotations["window"], annotations["minInterval"] = windowKey, minIntervalKey
		cfg["restartWindows"] = []interface{}{window}
		// Two restarts in 10 minutes trip it; still for 10 minutes releases
		// it: longer than the test.
		cfg["breaker"] = map[string]interface{}{"budget": 2, "window": "10m", "quiet": "10m"}
	})
	const n = 6 // paced: waves of 1, 2, 3
	f := newSafetyFleet(t, c.ns, c.keys, c.node, n)
	createOwn(t, c.ns, c.keys, c.node, "flappy", nil)
	createOwn(t, c.ns, c.keys, c.node, "nightly", map[string]string{windowKey: "soon"})
	createOwn(t, c.ns, c.keys, c.node, "paced", map[string]string{minIntervalKey: "1h"})
	c.start()
	waitFor(t, "every workload recorded and available", func() (bool, error) {
		ws, err := f.read(t)
		if err != nil || len(ws) != n+3 {
			return false, err
		}
		for name, w := range ws {
			if !w.available || w.replicaSets != 1 {
				return false, fmt.Errorf("%s: available %v, %d ReplicaSets", name, w.available, w.replicaSets)
			}
		}
		return true, nil
	})
	// Recorded: each carries its applied checksums (status and explain then
	// see no first sight).
	for _, name := range append(f.names, "flappy", "nightly", "paced") {
		waitAnnotation(t, c.ns, name, c.keys.applied, false)
	}

	// The fleet's change: its first wave never becomes ready and fails at
	// the deadline; the five others are held.
	c.node.neverReady(t, probeLabel, probeValue)
	setShared(t, f, "bad")
	// The breaker: two restarts, then a third change is held.
	for i := 1; i <= 2; i++ {
		setConfigMapKey(t, c.ns, "flappy", "v", fmt.Sprint(i))
		waitRestarts(t, f, "flappy", i)
	}
	setConfigMapKey(t, c.ns, "flappy", "v", "3")
	// The minimum interval: a first change restarts, the second waits.
	setConfigMapKey(t, c.ns, "paced", "v", "1")
	waitRestarts(t, f, "paced", 1)
	setConfigMapKey(t, c.ns, "paced", "v", "2")
	// The window: closed for hours.
	setConfigMapKey(t, c.ns, "nightly", "v", "1")

	leader := c.leader()
	metricEquals(t, leader, heldMetric, n) // five wave holds, one breaker hold
	metricEquals(t, leader, waitingMetric, 2)
	ws := f.mustRead(t)
	if ws["flappy"].hold == "" || !strings.Contains(ws["flappy"].hold, `"breaker"`) {
		t.Fatalf("flappy: hold %q, want the breaker's", ws["flappy"].hold)
	}
	pacedAt := ws["paced"].record.At

	rep, run := statusOf(t, c, "--metrics-url", "http://"+leader.metrics+"/metrics")
	if run.code != 0 {
		t.Fatalf("status: exit %d\n%s\n%s", run.code, run.stdout, run.stderr)
	}
	t.Logf("status -A:\n%s", runCLI(t, "status", "-A", "--kubeconfig", env.cluster.Kubeconfig, "--config", c.configFile).stdout)

	// The change: wave 1 of 3, its one restart failed, five held.
	shared := "configmap/" + c.ns + "/shared"
	var change *status.Change
	for i := range rep.Changes {
		if rep.Changes[i].Source == shared {
			change = &rep.Changes[i]
		}
	}
	_, holds := held(t, ws)
	if change == nil || !change.Halted || change.Wave != 1 || change.Waves != 3 || change.Reach != n || change.Restarted != 1 ||
		change.Failed != 1 || change.Held != n-1 || change.HeldSince == nil || !strings.Contains(change.Cause, "app-00") ||
		change.Change != holds["app-01"].Change ||
		change.Release != fmt.Sprintf("kubectl annotate configmap shared -n %s %s=%s --overwrite", c.ns, c.keys.release, holds["app-01"].Change) {
		t.Fatalf("the fleet's change: %+v\nchanges: %+v", change, rep.Changes)
	}

	// Each restart with its reason and end.
	byName := map[string]status.Restart{}
	for _, rs := range rep.Restarts {
		byName[strings.TrimPrefix(rs.Workload, "deployments.apps/"+c.ns+"/")] = rs
	}
	for _, name := range f.names[1:] {
		if rs := byName[name]; rs.Reason != status.ReasonWaveHalted || rs.Since == nil || rs.Release != change.Release {
			t.Errorf("%s: %+v, want held by the halted wave, since its hold, with the release", name, rs)
		}
	}
	if rs := byName["flappy"]; rs.Reason != status.ReasonBreaker || rs.Since == nil || !strings.Contains(rs.Ends, "still for 10m0s") {
		t.Errorf("flappy: %+v, want held by the breaker until its sources are still for 10m", rs)
	}
	if rs := byName["nightly"]; rs.Reason != status.ReasonWindow || rs.Until == nil || !rs.Until.Equal(opens) ||
		!strings.Contains(rs.Ends, opens.Format(time.RFC3339)) {
		t.Errorf("nightly: %+v, want waiting for its window, which opens at %s", rs, opens.Format(time.RFC3339))
	}
	if rs := byName["paced"]; rs.Reason != status.ReasonMinInterval || rs.Until == nil || !rs.Until.Equal(pacedAt.Add(time.Hour)) {
		t.Errorf("paced: %+v, want waiting for its minimum interval, until %s", rs, pacedAt.Add(time.Hour).Format(time.RFC3339))
	}
	if len(rep.Restarts) != n-1+3 {
		t.Errorf("%d restarts listed, want %d: %+v", len(rep.Restarts), n-1+3, rep.Restarts)
	}
	var rolled []string
	for _, ro := range rep.Rollouts {
		rolled = append(rolled, ro.Workload+" "+ro.Result)
	}
	if len(rolled) != 1 || rolled[0] != "deployments.apps/"+c.ns+"/app-00 failed" {
		t.Errorf("rollouts %q, want app-00's failed one", rolled)
	}

	// The leader from its Lease, the health from its metrics.
	ctl := rep.Controller
	if ctl == nil || ctl.Holder != c.holder() || ctl.Expired || ctl.Metrics == nil || ctl.Metrics.Ready == nil || !*ctl.Metrics.Ready ||
		ctl.Metrics.Held["wave"] != n-1 || ctl.Metrics.Held["breaker"] != 1 || ctl.Metrics.Waiting["window"] != 1 || ctl.Metrics.Waiting["min-interval"] != 1 {
		t.Errorf("controller: %+v (metrics %+v)", ctl, ctl.Metrics)
	}

	agreeWithExplain(t, c, f, rep)

	// The controller stopped: the same answer from the objects, and the
	// metrics said unreachable (not a pod: the API server's proxies fail).
	leader.Stop()
	down, run := statusOf(t, c)
	if run.code != 0 || down.Controller == nil || down.Controller.Metrics != nil || down.Controller.MetricsError == "" {
		t.Errorf("with the controller down: exit %d, controller %+v\n%s", run.code, down.Controller, run.stderr)
	}
	if fmt.Sprint(reasons(down)) != fmt.Sprint(reasons(rep)) {
		t.Errorf("with the controller down: %v, before %v", reasons(down), reasons(rep))
	}
}

// reasons are each listed workload's reason and end.
func reasons(r *status.Report) map[string]string {
	out := map[string]string{}
	for _, rs := range r.Restarts {
		until := ""
		if rs.Until != nil {
			until = rs.Until.Format(time.RFC3339)
		}
		out[rs.Workload] = rs.Reason + " " + until
	}
	return out
}

// agreeWithExplain checks that status's verdict on every workload of the
// cell is explain's: the same action and gate, and the same end where the
// objects tell it; those status does not list have nothing to restart.
func agreeWithExplain(t *testing.T, c *cell, f *safetyFleet, rep *status.Report) {
	t.Helper()
	listed := map[string]status.Restart{}
	for _, rs := range rep.Restarts {
		listed[rs.Workload] = rs
	}
	for name := range f.mustRead(t) {
		key := "deployments.apps/" + c.ns + "/" + name
		d := explainDecision(t, c, name)
		rs, ok := listed[key]
		switch {
		case !ok && (d.Action == explain.ActionNothing || d.Action == explain.ActionRecord):
		case !ok:
			t.Errorf("%s: explain says %s (%s), status does not list it", name, d.Action, strings.Join(d.Reasons, "; "))
		case rs.Action != d.Action || rs.Gate != d.Gate || (rs.Until == nil) != (d.Until == nil) || rs.Until != nil && !rs.Until.Equal(*d.Until):
			t.Errorf("%s: status says %s at %q until %v, explain %s at %q until %v", name, rs.Action, rs.Gate, rs.Until, d.Action, d.Gate, d.Until)
		}
	}
}
