package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The resume matrix (issue 18): for each state the controller leaves on the
// objects, workloads sharing their sources (each reads two ConfigMaps, each
// ConfigMap is read by six workloads, so every change goes out in paced
// waves) are driven into that state, and then the controller goes through
// one of four modes:
//
//	one-process    nothing happens to it
//	sigkill        SIGKILL, and a new process (a new identity) takes the lease
//	failover       SIGKILL of the leader; its warm standby takes over
//	frozen-leader  SIGSTOP of the leader past its lease, the standby takes
//	               over, SIGCONT: the old leader must write nothing and exit
//
// and the outcome must be exactly what the state calls for, each within its
// own timer plus a margin. Restarts are counted as pod-template changes (one
// ReplicaSet each), never as generations.
//
// Every cell has a namespace, a fake node and controllers of its own (with
// leader election in its namespace, one replica or two), and runs in
// parallel with the others.

type resumeMode string

const (
	oneProcess   resumeMode = "one-process"
	sigkill      resumeMode = "sigkill"
	failover     resumeMode = "failover"
	frozenLeader resumeMode = "frozen-leader"
)

var resumeModes = []resumeMode{oneProcess, sigkill, failover, frozenLeader}

// Lease timing of every cell: takeovers within seconds.
const (
	cellLease       = 4 * time.Second
	cellLeaseConfig = "4s"
)

// sharedFleet is n Deployments of one replica on the cell's node, app-00
// to app-NN, over m ConfigMaps src-0 to src-M: workload i reads src-(i%m)
// through envFrom and src-((i+1)%m) through a volume.
type sharedFleet struct {
	*safetyFleet
	sources []string
	readers map[string][]string // workload -> the two sources it reads
}

type sharedOptions struct {
	minReadySeconds int32 // keeps each rollout under way that long
}

func newSharedFleet(t *testing.T, ns string, keys safetyKeys, node *fakeNode, n, m int, opts sharedOptions) *sharedFleet {
	t.Helper()
	f := &sharedFleet{safetyFleet: &safetyFleet{ns: ns, keys: keys, node: node}, readers: map[string][]string{}}
	for i := 0; i < m; i++ {
		name := fmt.Sprintf("src-%d", i)
		createConfigMap(t, ns, name, map[string]string{"v": "0"})
		f.sources = append(f.sources, name)
	}
	one, keepAll := int32(1), int32(1000)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("app-%02d", i)
		a, b := f.sources[i%m], f.sources[(i+1)%m]
		f.names = append(f.names, name)
		f.readers[name] = []string{a, b}
		spec := node.podSpec(t, fmt.Sprintf(`
containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: %s}}]}]
volumes: [{name: v, configMap: {name: %s}}]`, a, b))
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}},
			Spec: appsv1.DeploymentSpec{
				Replicas:             &one,
				RevisionHistoryLimit: &keepAll,
				MinReadySeconds:      opts.minReadySeconds,
				Selector:             &metav1.LabelSelector{MatchLabels: labelsFor(name)},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, probeLabel: probeValue}},
					Spec:       spec,
				},
			},
		}
		if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// readersOf returns the workloads reading the source, sorted (the order of
// its waves).
func (f *sharedFleet) readersOf(src string) []string {
	var out []string
	for name, srcs := range f.readers {
		for _, s := range srcs {
			if s == src {
				out = append(out, name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// restartsAfter counts, per workload, the pod templates whose restart
// timestamp is later than since (one ReplicaSet each).
func (f *sharedFleet) restartsAfter(t *testing.T, since time.Time) map[string]int {
	t.Helper()
	rss, err := env.kube.AppsV1().ReplicaSets(f.ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, rs := range rss.Items {
		raw := rs.Spec.Template.Annotations[f.keys.timestamp]
		if raw == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			t.Fatalf("ReplicaSet %s: restart timestamp %q: %v", rs.Name, raw, err)
		}
		if at.After(since) {
			out[rs.Labels["app"]]++
		}
	}
	return out
}

// counts returns each workload's ReplicaSets (restarts + 1).
func counts(ws map[string]workload) map[string]int {
	out := map[string]int{}
	for name, w := range ws {
		out[name] = w.replicaSets
	}
	return out
}

// truth waits until deadline for every named workload to run the current
// data of the sources it reads: applied checksums equal to the checksums of
// the ConfigMaps as the API server returns them now, no hold, a restart
// timestamp later than since (the last change), and its rollout complete.
// Reaching the deadline fails, naming each stale workload and why, its hold
// annotation included.
func (f *sharedFleet) truth(t *testing.T, keyNS string, names []string, since, deadline time.Time, what string) {
	t.Helper()
	var last error
	for {
		last = f.staleness(t, keyNS, names, since)
		if last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not every workload on its sources' final data %s after the last change: %v",
				what, deadline.Sub(since).Round(time.Second), last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (f *sharedFleet) staleness(t *testing.T, keyNS string, names []string, since time.Time) error {
	t.Helper()
	ctx := ctxFor(t)
	current := map[string]string{}
	for _, src := range f.sources {
		cm, err := env.kube.CoreV1().ConfigMaps(f.ns).Get(ctx, src, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sum, err := configMapChecksumIn(keyNS, cm, nil)
		if err != nil {
			return err
		}
		current[src] = sum
	}
	list, err := env.kube.AppsV1().Deployments(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ws, err := f.read(t)
	if err != nil {
		return err
	}
	byName := map[string]appsv1.Deployment{}
	for _, d := range list.Items {
		byName[d.Name] = d
	}
	var wrong []string
	for _, name := range names {
		d := byName[name]
		var why []string
		applied := map[string]string{}
		if err := json.Unmarshal([]byte(d.Annotations[f.keys.applied]), &applied); err != nil {
			why = append(why, fmt.Sprintf("unreadable applied checksums %q", d.Annotations[f.keys.applied]))
		}
		for _, src := range f.readers[name] {
			if got := applied[sourceID("configmap", f.ns, src)]; got != current[src] {
				why = append(why, fmt.Sprintf("applied %s is %q, its data now %q", src, got, current[src]))
			}
		}
		stamp, err := time.Parse(time.RFC3339Nano, ws[name].stamp)
		if err != nil || !stamp.After(since) {
			why = append(why, fmt.Sprintf("pods' template restarted at %q, not after the last change at %s", ws[name].stamp, since.Format(time.RFC3339Nano)))
		}
		if h := ws[name].hold; h != "" {
			why = append(why, "held: "+h)
		}
		if !ws[name].available {
			why = append(why, fmt.Sprintf("rollout not complete (%d ReplicaSets, record %+v)", ws[name].replicaSets, ws[name].record))
		}
		if len(why) > 0 {
			wrong = append(wrong, name+": "+strings.Join(why, "; "))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%d of %d stale:\n\t%s", len(wrong), len(names), bulleted(wrong))
	}
	return nil
}

// cell is one cell of the matrix: a namespace, a node, a fleet, and the
// controllers of its mode.
type cell struct {
	t          *testing.T
	mode       resumeMode
	ns         string
	keys       safetyKeys
	node       *fakeNode
	configFile string
	args       []string
	procs      map[string]*controllerProcess // by leader-election identity
	started    int
}

// newCell creates the namespace, node and keys; config changes the safety
// config (deadline, breaker, waves) before leader election is added.
func newCell(t *testing.T, mode resumeMode, prefix, deadline, grace string, config func(map[string]interface{})) *cell {
	t.Helper()
	c := &cell{t: t, mode: mode, procs: map[string]*controllerProcess{}}
	c.ns = newNamespace(t)
	c.node = startFakeNode(t, "kwok-"+c.ns)
	c.keys = safetyKeysFor(prefix)
	c.configFile = safetyConfig(t, c.ns, c.ns, c.keys, deadline, func(cfg map[string]interface{}) {
		if config != nil {
			config(cfg)
		}
		cfg["leaderElection"] = map[string]interface{}{
			"enabled": true, "namespace": c.ns, "leaseName": "restart-controller",
			"leaseDuration": cellLeaseConfig, "renewDeadline": "3s", "retryPeriod": "500ms",
		}
	})
	c.args = []string{"--restart-grace-period", grace, "--restart-check-period", "100"}
	return c
}

// start runs the controllers of the mode: one replica, or a leader and a
// warm standby; it returns once one holds the lease.
func (c *cell) start() {
	c.t.Helper()
	c.startReplica()
	if c.mode == failover || c.mode == frozenLeader {
		c.startReplica()
	}
	waitFor(c.t, "a leader", func() (bool, error) { return c.holder() != "", nil })
}

func (c *cell) startReplica() string {
	c.t.Helper()
	id := fmt.Sprintf("r%d", c.started)
	c.started++
	p, err := env.startController(ctxFor(c.t), c.ns+"-"+id, c.configFile, append(c.args, "--leader-election-identity", id)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.procs[id] = p
	c.t.Cleanup(func() { p.Kill() })
	logTailOnFailure(c.t, id, &p)
	return id
}

func (c *cell) holder() string {
	lease, err := env.kube.CoordinationV1().Leases(c.ns).Get(ctxFor(c.t), "restart-controller", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// leader is the process holding the lease.
func (c *cell) leader() *controllerProcess {
	c.t.Helper()
	var p *controllerProcess
	waitFor(c.t, "a leader", func() (bool, error) {
		p = c.procs[c.holder()]
		return p != nil && !exited(p), nil
	})
	return p
}

// disrupt does to the controller what the mode says and returns once a
// process of the cell leads again: then, when it took over.
func (c *cell) disrupt() time.Time {
	c.t.Helper()
	switch c.mode {
	case oneProcess:
		return time.Now()
	case sigkill:
		old := c.holder()
		c.procs[old].Kill()
		id := c.startReplica()
		waitFor(c.t, "the new process to take the lease from the killed one", func() (bool, error) { return c.holder() == id, nil })
		return time.Now()
	case failover:
		old := c.holder()
		c.procs[old].Kill()
		waitFor(c.t, "the standby to take over", func() (bool, error) { h := c.holder(); return h != "" && h != old, nil })
		return time.Now()
	case frozenLeader:
		old := c.holder()
		p := c.procs[old]
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			c.t.Fatal(err)
		}
		frozen := time.Now()
		waitFor(c.t, "the standby to take over from the frozen leader", func() (bool, error) { h := c.holder(); return h != "" && h != old, nil })
		took := time.Now()
		// Past the lease, with the standby at work, the old leader wakes.
		time.Sleep(time.Until(frozen.Add(cellLease + 2*time.Second)))
		woke, err := os.Stat(p.logPath)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			c.t.Fatal(err)
		}
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			c.t.Fatalf("the old leader %s woke from SIGSTOP and still runs 30s later, without the lease", old)
		}
		if code := p.ExitCode(); code == 0 {
			c.t.Fatalf("the old leader %s exited 0 after losing its lease, want an error", old)
		}
		c.assertNoWritesAfter(old, p, woke.Size())
		return took
	}
	c.t.Fatalf("unknown mode %q", c.mode)
	return time.Time{}
}

// assertNoWritesAfter fails if the process logged a write (a restart, a
// recording, a hold, a rollout outcome) after the first offset bytes of its
// log: what it logged after waking without the lease.
func (c *cell) assertNoWritesAfter(id string, p *controllerProcess, offset int64) {
	c.t.Helper()
	raw, err := os.ReadFile(p.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	if int64(len(raw)) < offset {
		offset = int64(len(raw))
	}
	var writes []string
	for _, line := range strings.Split(string(raw[offset:]), "\n") {
		for _, w := range []string{": restarted", ": recorded", "restart held", "rollout complete", "rollout failed", "removing it"} {
			if strings.Contains(line, w) {
				writes = append(writes, line)
				break
			}
		}
	}
	if len(writes) > 0 {
		c.t.Fatalf("the old leader %s wrote after waking without the lease:\n\t%s", id, bulleted(writes))
	}
}

// takeover is how long a mode may take to lead again after a disruption.
func (c *cell) takeover() time.Duration {
	if c.mode == oneProcess {
		return 0
	}
	return cellLease + 10*time.Second
}

// matrix runs row for every mode, in parallel.
func matrix(t *testing.T, row func(t *testing.T, mode resumeMode)) {
	t.Parallel()
	for _, mode := range resumeModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			row(t, mode)
		})
	}
}

// Row 1, breaker hold: workloads sharing their sources are restarted until
// the breaker holds them (budget 2 within 60s); then the changes stop. The
// held restarts must go within the quiet time (6s) plus a margin, each
// workload exactly once after the last change, with every hold gone, and
// none of the held ones before the quiet time.
func TestResumeBreakerHold(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) {
		const quiet = 6 * time.Second
		c := newCell(t, mode, "rbreak", "30s", "1s", func(cfg map[string]interface{}) {
			cfg["breaker"] = map[string]interface{}{"budget": 2, "window": "60s", "quiet": "6s"}
		})
		f := newSharedFleet(t, c.ns, c.keys, c.node, 12, 4, sharedOptions{})
		c.start()
		f.waitReady(t)

		// Every source changes every 5s until every workload is held.
		var last time.Time
		var heldNames []string
		var holds map[string]holdRecord
		for round, end := 1, time.Now().Add(90*time.Second); ; round++ {
			last = time.Now()
			for _, src := range f.sources {
				setConfigMapKey(t, c.ns, src, "v", fmt.Sprint(round))
			}
			time.Sleep(5 * time.Second)
			ws := f.mustRead(t)
			heldNames, holds = held(t, ws)
			for name, w := range ws {
				if w.replicaSets-1 > 2 {
					t.Fatalf("%s restarted %d times while its sources kept changing, budget 2", name, w.replicaSets-1)
				}
			}
			if len(heldNames) == len(f.names) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("after %d rounds of changes, only %d of %d workloads held: %v", round, len(heldNames), len(f.names), heldNames)
			}
		}
		for _, name := range heldNames {
			if holds[name].Kind != "breaker" {
				t.Fatalf("%s: hold %+v, want the breaker's", name, holds[name])
			}
		}
		t.Logf("%s: every workload held by the breaker; last change at %s", mode, last.Format(time.RFC3339Nano))

		took := c.disrupt()
		from := last
		if took.After(from) {
			from = took
		}
		deadline := from.Add(quiet + 40*time.Second)
		f.truth(t, c.ns, f.names, last, deadline, "breaker hold, "+string(mode))
		t.Logf("%s: every held workload restarted %s after the last change", mode, time.Since(last).Round(100*time.Millisecond))

		// Exactly once each after the last change, and not before the quiet time.
		for name, w := range f.mustRead(t) {
			if at := w.record.At; at.Sub(last) < quiet {
				t.Fatalf("%s restarted at %s, %s after the last change: before the quiet time %s", name, at.Format(time.RFC3339Nano), at.Sub(last), quiet)
			}
		}
		settled := f.mustRead(t)
		stays(t, "no further restarts once released", 5*time.Second, func() error {
			after := f.restartsAfter(t, last)
			for _, name := range f.names {
				if after[name] != 1 {
					return fmt.Errorf("%s restarted %d times after the last change, want exactly 1 (the merged changes)", name, after[name])
				}
			}
			if now := counts(f.mustRead(t)); fmt.Sprint(now) != fmt.Sprint(counts(settled)) {
				return fmt.Errorf("ReplicaSets %v, then %v", counts(settled), now)
			}
			return nil
		})
	})
}
