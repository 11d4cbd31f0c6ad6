package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// The fleet step (--fleet N): N Deployments of one replica, whose
// pods kwok makes ready, all reading ConfigMap "shared"; one change of it,
// once with the default health-gated waves (1, 2, 4, ... each started when
// every rollout of the change so far has completed) and once unpaced. Each
// mode gets its own namespace and fleet, created and rolled out before its
// controller starts, on one fresh cluster of its own after the scales: the
// same starting point for both, and nothing left of the scenario above.

const (
	fleetConfigMap = "shared"
	rolloutAnno    = "com.xing.deployment-restart.rollout"
	// unpacedUpTo is the config's bound that turns waves off.
	unpacedUpTo = 100000
)

// fleetMode is one controller run over one fleet.
type fleetMode struct {
	name   string
	paced  bool
	ns     string
	config string // the controller's config file

	ready      time.Duration // controller start to ready
	restarted  int           // Deployments restarted by the change
	rsMin      int           // new ReplicaSets per Deployment over the change
	rsMax      int
	tplMax     int             // pod-template timestamp changes seen per Deployment, at most
	first      time.Duration   // update issued → first restart seen
	last       time.Duration   // update issued → last restart seen
	complete   time.Duration   // update issued → every Deployment's status complete
	recorded   time.Duration   // update issued → every rollout record "complete" (the controller's view)
	cpu        float64         // controller CPU seconds from the update to completion
	held       float64         // restart_controller_restarts_held at the end
	rollouts   float64         // restart_controller_rollouts_total at the end
	restarts   []time.Duration // first restart of each, after the update, sorted
	byName     []time.Duration // the same in name order (wave order); -1 when none
	loadBefore string
	loadAfter  string
	others     string
}

type fleetResult struct {
	n     int
	began time.Time
	modes []*fleetMode
}

// runFleet runs the fleet step on a fresh cluster of its own.
func runFleet(ctx context.Context, o options) (*fleetResult, error) {
	res := &fleetResult{n: o.fleet, began: time.Now()}
	dir := filepath.Join(o.workDir, "fleet")
	logf("=== fleet: %d Deployments of 1 replica on ConfigMap %q, paced and unpaced (%s)", o.fleet, fleetConfigMap, dir)
	err := withCluster(ctx, o, dir, nil, func(ctx context.Context, e *env) error {
		for _, paced := range []bool{true, false} {
			m := &fleetMode{paced: paced, name: "paced", ns: "fleet-paced"}
			if !paced {
				m.name, m.ns = "unpaced", "fleet-unpaced"
			}
			e.others.take()
			if err := e.runFleetMode(ctx, m); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if m.others = e.others.take(); m.others != "" {
				logf("warning: other heavy processes ran during the %s run: %s", m.name, m.others)
			}
			res.modes = append(res.modes, m)
		}
		return nil
	})
	return res, err
}

// runFleetMode creates the mode's fleet, starts its controller, changes the
// ConfigMap once and measures until every rollout is complete.
func (e *env) runFleetMode(ctx context.Context, m *fleetMode) error {
	n := e.o.fleet
	if err := createFleet(ctx, e.cs, m.ns, n); err != nil {
		return err
	}
	w, err := watchFleet(ctx, e.cs, m.ns)
	if err != nil {
		return err
	}
	if err := w.waitFor(ctx, 3*time.Minute, func(s fleetSnapshot) error { return s.allAvailable(n) }); err != nil {
		return fmt.Errorf("the fleet's first rollout: %w", err)
	}
	if m.config, err = fleetConfig(e.o.configFile, e.dir, m.ns, m.paced); err != nil {
		return err
	}
	o := e.o
	o.configFile = m.config
	if e.proc, err = startController(o, e.kubeconfig, filepath.Join(e.dir, "controller-"+m.name+".log"), 0); err != nil {
		return err
	}
	e.recording = true
	if m.ready, _, err = e.proc.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	if err := w.waitFor(ctx, 2*time.Minute, func(s fleetSnapshot) error { return s.allRecorded(n) }); err != nil {
		return fmt.Errorf("%w\n%s", err, e.proc.logTail(20))
	}
	w.waitQuiet(ctx, 3*time.Second)
	rsBefore, err := replicaSetsPerApp(ctx, e.cs, m.ns)
	if err != nil {
		return err
	}
	cpuBefore, _ := e.proc.cpuSeconds()
	m.loadBefore = loadAverage()

	logf("--- %s: changing ConfigMap %s/%s read by %d Deployments", m.name, m.ns, fleetConfigMap, n)
	issued := time.Now()
	if err := setFleetConfigMap(ctx, e.cs, m.ns, "1"); err != nil {
		return err
	}
	if err := w.waitFor(ctx, 5*time.Minute, func(s fleetSnapshot) error { return s.allDone(n) }); err != nil {
		return fmt.Errorf("%w\n%s", err, e.proc.logTail(20))
	}
	m.cpu, _ = e.proc.cpuSeconds()
	m.cpu -= cpuBefore
	m.loadAfter = loadAverage()
	// A second restart of any of them would come now, if at all.
	w.waitQuiet(ctx, 3*time.Second)
	rsAfter, err := replicaSetsPerApp(ctx, e.cs, m.ns)
	if err != nil {
		return err
	}
	m.collect(w.snapshot(), issued, rsBefore, rsAfter, n)
	if metrics, err := e.proc.metrics(); err == nil {
		m.held, _ = metricSum(metrics, "restart_controller_restarts_held")
		m.rollouts, _ = metricSum(metrics, "restart_controller_rollouts_total")
	}
	e.finishProgram()
	logf("  %s: %d restarted (new ReplicaSets per Deployment %d–%d), last restart %s, every rollout complete %s, recorded %s after the update; controller CPU %.2f s; load %s → %s",
		m.name, m.restarted, m.rsMin, m.rsMax, sec(m.last), sec(m.complete), sec(m.recorded), m.cpu, m.loadBefore, m.loadAfter)
	return nil
}

func (m *fleetMode) collect(s fleetSnapshot, issued time.Time, rsBefore, rsAfter map[string]int, n int) {
	m.rsMin = -1
	for i := range n {
		name := fleetName(i)
		d := s[name]
		seen := time.Duration(-1)
		if len(d.restarts) > 0 {
			m.restarted++
			seen = d.restarts[0].Sub(issued)
			m.restarts = append(m.restarts, seen)
		}
		m.byName = append(m.byName, seen)
		m.tplMax = max(m.tplMax, len(d.restarts))
		if d.completeAt.Sub(issued) > m.complete {
			m.complete = d.completeAt.Sub(issued)
		}
		if d.recordedAt.Sub(issued) > m.recorded {
			m.recorded = d.recordedAt.Sub(issued)
		}
		grew := rsAfter[name] - rsBefore[name]
		if m.rsMin < 0 || grew < m.rsMin {
			m.rsMin = grew
		}
		m.rsMax = max(m.rsMax, grew)
	}
	sort.Slice(m.restarts, func(i, j int) bool { return m.restarts[i] < m.restarts[j] })
	if len(m.restarts) > 0 {
		m.first, m.last = m.restarts[0], m.restarts[len(m.restarts)-1]
	}
}

func fleetName(i int) string { return fmt.Sprintf("app-%02d", i) }

// createFleet creates the namespace, the ConfigMap and n Deployments of one
// replica on the kwok node, each reading the whole ConfigMap.
func createFleet(ctx context.Context, cs kubernetes.Interface, ns string, n int) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetConfigMap, Namespace: ns}, Data: map[string]string{"v": "0"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ConfigMap: %w", err)
	}
	for i := range n {
		d := fleetDeployment(ns, fleetName(i))
		if err := retryTransient(ctx, func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", d.Name, err)
		}
	}
	return nil
}

// fleetDeployment has one replica, unlike the scenario's: its restarts must
// really roll, one new pod made ready by kwok and the old one removed at
// once (no termination grace), for waves to wait on.
func fleetDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{optInAnnotation: "enabled"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{testcluster.NodeLabelKey: testcluster.NodeLabelValue},
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					TerminationGracePeriodSeconds: new(int64(0)),
					Containers: []corev1.Container{{
						Name:    "app",
						Image:   "registry.example/app:1",
						EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: fleetConfigMap}}}},
					}},
				},
			},
		},
	}
}

func setFleetConfigMap(ctx context.Context, cs kubernetes.Interface, ns, v string) error {
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, fleetConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading ConfigMap: %w", err)
	}
	cm.Data = map[string]string{"v": v}
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating ConfigMap: %w", err)
	}
	return nil
}

// fleetConfig writes the controller's config for a mode: the given file
// watching only ns, with waves as they are (paced) or off.
func fleetConfig(base, dir, ns string, paced bool) (string, error) {
	raw, err := os.ReadFile(base)
	if err != nil {
		return "", err
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", base, err)
	}
	cfg["namespaces"] = []any{ns}
	if !paced {
		waves, _ := cfg["waves"].(map[string]any)
		if waves == nil {
			waves = map[string]any{}
		}
		waves["unpacedUpTo"] = unpacedUpTo
		cfg["waves"] = waves
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "config-"+ns+".yaml")
	return file, os.WriteFile(file, out, 0o644)
}

// replicaSetsPerApp counts ReplicaSets per Deployment (label app): one per
// pod template the Deployment ever had. A restart makes one; a change of
// metadata.generation alone (an annotation, a scale) makes none, so the
// generation never counts restarts.
func replicaSetsPerApp(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]int, error) {
	list, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets: %w", err)
	}
	out := map[string]int{}
	for _, rs := range list.Items {
		out[rs.Labels["app"]]++
	}
	return out, nil
}

// fleetWatch follows the Deployments of a fleet: when each one's pod
// template was restarted, when its rollout was complete by its status, and
// when the controller recorded that rollout complete.
type fleetWatch struct {
	store cache.Store

	mu        sync.Mutex
	deps      fleetSnapshot
	lastWrite time.Time // last change of a template timestamp or a controller annotation
}

type fleetDep struct {
	restarts   []time.Time // pod-template timestamp changes seen
	recorded   bool        // carries the applied checksums
	available  bool        // status: the current template rolled out
	completeAt time.Time   // first seen complete after its first restart
	recordedAt time.Time   // first seen with a rollout record "complete"
}

type fleetSnapshot map[string]fleetDep

func watchFleet(ctx context.Context, cs kubernetes.Interface, ns string) (*fleetWatch, error) {
	w := &fleetWatch{deps: fleetSnapshot{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().Deployments().Informer()
	w.store = inf.GetStore()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				w.observe(nil, d, time.Now())
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*appsv1.Deployment)
			n, ok2 := newObj.(*appsv1.Deployment)
			if ok1 && ok2 {
				w.observe(o, n, time.Now())
			}
		},
	})
	if err != nil {
		return nil, err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("bench: fleet watch did not sync")
	}
	return w, nil
}

func (w *fleetWatch) observe(old, d *appsv1.Deployment, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.deps[d.Name]
	ts := d.Spec.Template.Annotations[restartAnnotation]
	if old != nil && old.Spec.Template.Annotations[restartAnnotation] != ts {
		s.restarts = append(s.restarts, now)
		w.lastWrite = now
	}
	if old != nil && (old.Annotations[appliedAnnotation] != d.Annotations[appliedAnnotation] ||
		old.Annotations[rolloutAnno] != d.Annotations[rolloutAnno]) {
		w.lastWrite = now
	}
	_, s.recorded = d.Annotations[appliedAnnotation]
	s.available = rolledOut(d)
	if len(s.restarts) > 0 && s.available && s.completeAt.IsZero() {
		s.completeAt = now
	}
	var rec struct {
		Result  string `json:"result"`
		Unpaced bool   `json:"unpaced"`
	}
	// An unpaced restart's end is not written: the controller's view of
	// it is the workload's status, so it is "recorded" when complete.
	if len(s.restarts) > 0 && json.Unmarshal([]byte(d.Annotations[rolloutAnno]), &rec) == nil && s.recordedAt.IsZero() &&
		(rec.Result == "complete" || rec.Unpaced && !s.completeAt.IsZero()) {
		s.recordedAt = now
	}
	w.deps[d.Name] = s
}

// rolledOut is kubectl rollout status's test: the Deployment controller
// has seen the current template, and every replica is updated and
// available, the old ones gone.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want
}

func (w *fleetWatch) snapshot() fleetSnapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(fleetSnapshot, len(w.deps))
	for k, v := range w.deps {
		v.restarts = append([]time.Time(nil), v.restarts...)
		out[k] = v
	}
	return out
}

// waitFor polls the watch every 50 ms until cond holds, or fails with its
// last answer after timeout.
func (w *fleetWatch) waitFor(ctx context.Context, timeout time.Duration, cond func(fleetSnapshot) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond(w.snapshot())
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitQuiet waits until nothing the controller writes changed for quiet.
func (w *fleetWatch) waitQuiet(ctx context.Context, quiet time.Duration) {
	for {
		w.mu.Lock()
		idle := time.Since(w.lastWrite)
		w.mu.Unlock()
		if idle >= quiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(quiet - idle):
		}
	}
}

func (s fleetSnapshot) each(n int, what string, ok func(fleetDep) bool) error {
	var missing []string
	for i := range n {
		if name := fleetName(i); !ok(s[name]) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d/%d not %s (%s)", len(missing), n, what, strings.Join(missing[:min(len(missing), 5)], ", "))
	}
	return nil
}

func (s fleetSnapshot) allAvailable(n int) error {
	return s.each(n, "available", func(d fleetDep) bool { return d.available })
}

func (s fleetSnapshot) allRecorded(n int) error {
	return s.each(n, "recorded", func(d fleetDep) bool { return d.recorded })
}

// allDone: every Deployment restarted, rolled out by its status, and its
// rollout recorded complete by the controller.
func (s fleetSnapshot) allDone(n int) error {
	return s.each(n, "restarted and rolled out", func(d fleetDep) bool {
		return len(d.restarts) > 0 && d.available && !d.completeAt.IsZero() && !d.recordedAt.IsZero()
	})
}

// renderFleet is the report's section of the fleet step.
func renderFleet(o options, r *fleetResult) string {
	if r == nil || len(r.modes) != 2 {
		return ""
	}
	p, u := r.modes[0], r.modes[1]
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Fleet: %d Deployments on one ConfigMap, paced against unpaced\n\n", r.n)
	fmt.Fprintf(&b, "%s; controller %s; %s.\n", r.began.UTC().Format("2006-01-02 15:04 MST"), o.version, machine())
	fmt.Fprintf(&b, "Each mode: its own namespace and %d fresh Deployments of 1 replica (kwok makes pods ready), all rolled out before the controller (grace 0) starts; then one update of the ConfigMap.\n\n", r.n)
	t := &table{}
	row := func(label, paced, unpaced string) {
		t.set(0, 2, label, paced)
		t.set(1, 2, label, unpaced)
	}
	row("Deployments restarted", fmt.Sprintf("%d / %d", p.restarted, r.n), fmt.Sprintf("%d / %d", u.restarted, r.n))
	row("Restarts per Deployment (new ReplicaSets, min–max)", fmt.Sprintf("%d–%d", p.rsMin, p.rsMax), fmt.Sprintf("%d–%d", u.rsMin, u.rsMax))
	row("Pod-template restarts seen per Deployment, at most", fmt.Sprint(p.tplMax), fmt.Sprint(u.tplMax))
	row("Update → first restart seen", sec(p.first), sec(u.first))
	row("Update → last restart seen", sec(p.last), sec(u.last))
	row("Update → every rollout complete (Deployment status)", sec(p.complete), sec(u.complete))
	row("Update → every rollout recorded complete by the controller (unpaced: not written, complete by its status)", sec(p.recorded), sec(u.recorded))
	row("Last restart seen of each wave in name order ("+waveSizes(r.n)+")", waveTimes(p), waveTimes(u))
	row("Controller CPU seconds, update → done", fmt.Sprintf("%.2f s", p.cpu), fmt.Sprintf("%.2f s", u.cpu))
	row("Rollouts followed / restarts held at the end", fmt.Sprintf("%.0f / %.0f", p.rollouts, p.held), fmt.Sprintf("%.0f / %.0f", u.rollouts, u.held))
	row("Controller ready after start", sec(p.ready), sec(u.ready))
	row("Load average before → after the change", p.loadBefore+" → "+p.loadAfter, u.loadBefore+" → "+u.loadAfter)
	row("Other heavy processes during the run", orNone(p.others), orNone(u.others))
	t.write(&b, "Figure", []string{"paced (default waves)", fmt.Sprintf("unpaced (`unpacedUpTo: %d`)", unpacedUpTo)})
	fmt.Fprintf(&b, "\nPaced / unpaced: last restart %s, every rollout complete %s, recorded complete %s.\n",
		ratio(p.last, u.last), ratio(p.complete, u.complete), ratio(p.recorded, u.recorded))
	return b.String()
}

// waves splits n members as the default waves do: 1, 2, 4, ... in name
// order, the last one what is left.
func waves(n int) []int {
	var out []int
	for size := 1; n > 0; size *= 2 {
		out = append(out, min(size, n))
		n -= min(size, n)
	}
	return out
}

func waveSizes(n int) string {
	var parts []string
	for _, s := range waves(n) {
		parts = append(parts, fmt.Sprint(s))
	}
	return strings.Join(parts, ", ")
}

// waveTimes is, for each default wave, when its last restart was seen: the
// paced run's steps, and in the unpaced run the same workloads all at once.
func waveTimes(m *fleetMode) string {
	var parts []string
	from := 0
	for _, size := range waves(len(m.byName)) {
		last := time.Duration(-1)
		for _, d := range m.byName[from : from+size] {
			last = max(last, d)
		}
		from += size
		if last < 0 {
			parts = append(parts, "–")
			continue
		}
		parts = append(parts, fmt.Sprintf("%.1f", last.Seconds()))
	}
	return strings.Join(parts, ", ") + " s"
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f×", float64(a)/float64(b))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// fleetReport runs the fleet step (--fleet) and renders its section; "" when
// it is skipped.
func fleetReport(ctx context.Context, o options) string {
	if o.fleet == 0 {
		return ""
	}
	r, err := runFleet(ctx, o)
	if err != nil {
		fail("fleet: %v", err)
	}
	return renderFleet(o, r)
}
