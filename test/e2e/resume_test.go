package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The resume matrix: for each state the controller leaves on the
// objects, workloads sharing their sources (each reads two ConfigMaps, each
// ConfigMap is read by six workloads, so every change goes out in paced
// waves) are driven into that state, and then the controller goes through
// one of four modes:
//
//	one-process    nothing happens to it
//	sigkill        SIGKILL, and a new process (a new identity) takes the lease
//	failover       SIGKILL of the leader; its warm standby takes over
//	frozen-leader  SIGSTOP of the leader past its lease, the standby takes
//	               over, SIGCONT: the old leader must write nothing (it exits,
//	               or stands by if a config reload restarted its election)
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
	deadline   string // of Deployments' rollouts
	args       []string
	procs      map[string]*controllerProcess // by leader-election identity
	started    int
}

// newCell creates the namespace, node and keys; config changes the safety
// config (deadline, breaker, waves) before leader election is added.
func newCell(t *testing.T, mode resumeMode, prefix, deadline, grace string, config func(map[string]interface{})) *cell {
	t.Helper()
	c := &cell{t: t, mode: mode, procs: map[string]*controllerProcess{}, deadline: deadline}
	c.ns = newNamespace(t)
	c.node = startFakeNode(t, "kwok-"+c.ns)
	c.keys = safetyKeysFor(prefix)
	c.configFile = c.writeConfig(config)
	c.args = []string{"--restart-grace-period", grace, "--restart-check-period", "100"}
	return c
}

// writeConfig writes the cell's config file (again): examples/config.yaml
// with the cell's namespace, keys, rollout deadline and leader election,
// changed by config.
func (c *cell) writeConfig(config func(map[string]interface{})) string {
	c.t.Helper()
	return safetyConfig(c.t, c.ns, c.ns, c.keys, c.deadline, func(cfg map[string]interface{}) {
		if config != nil {
			config(cfg)
		}
		cfg["leaderElection"] = map[string]interface{}{
			"enabled": true, "namespace": c.ns, "leaseName": "restart-controller",
			"leaseDuration": cellLeaseConfig, "renewDeadline": "3s", "retryPeriod": "500ms",
		}
	})
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
// process of the cell leads again: then, when it took over. In the modes with
// a standby, a fresh standby is started after the takeover, so that a cell
// can be disrupted again.
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
		took := time.Now()
		c.startReplica()
		return took
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
		cont := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			c.t.Fatal(err)
		}
		// It must find out it lost the lease: exit (the usual way back), or
		// stand by (when a config reload restarted its election meanwhile).
		waitFor(c.t, "the woken leader "+old+" to exit or stand by", func() (bool, error) {
			if exited(p) {
				return true, nil
			}
			v, err := p.Metric("restart_controller_leader")
			return err == nil && v == 0, err
		})
		if exited(p) {
			if code := p.ExitCode(); code == 0 {
				c.t.Fatalf("the old leader %s exited 0 after losing its lease, want an error", old)
			}
		} else {
			time.Sleep(2 * time.Second) // a write under way when it stood by would be logged by now
		}
		c.assertNoWritesAfter(old, p, woke.Size(), cont)
		c.startReplica()
		return took
	}
	c.t.Fatalf("unknown mode %q", c.mode)
	return time.Time{}
}

// assertNoWritesAfter fails if the process logged a write (a restart, a
// recording, a hold, a rollout outcome) after the first offset bytes of its
// log, which it wrote before it was woken at cont, and decided after that.
// A request sent before it was frozen is answered at once on waking: a
// restart is told apart by its template's timestamp (the decision's time:
// before the freeze, or after cont), another write by being logged within
// inFlightAtFreeze of cont. Those are only logged.
func (c *cell) assertNoWritesAfter(id string, p *controllerProcess, offset int64, cont time.Time) {
	c.t.Helper()
	const inFlightAtFreeze = 250 * time.Millisecond
	raw, err := os.ReadFile(p.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	if int64(len(raw)) < offset {
		offset = int64(len(raw))
	}
	workloadOf := regexp.MustCompile(`workload=deployments\.apps/([^/ ]+)/([^ ]+)`)
	var writes, inFlight []string
	for _, line := range strings.Split(string(raw[offset:]), "\n") {
		for _, w := range []string{": restarted", ": recorded", "restart held", "rollout complete", "rollout failed", "removing it"} {
			if !strings.Contains(line, w) {
				continue
			}
			stamp, _, _ := strings.Cut(line, " ")
			logged, err := time.Parse(time.RFC3339Nano, stamp)
			decidedAfter := err != nil || !logged.Before(cont.Add(inFlightAtFreeze))
			if m := workloadOf.FindStringSubmatch(line); w == ": restarted" && m != nil && err == nil {
				decidedAfter = c.restartedBetween(m[1], m[2], cont, logged)
			}
			if decidedAfter {
				writes = append(writes, line)
			} else {
				inFlight = append(inFlight, line)
			}
			break
		}
	}
	if len(inFlight) > 0 {
		c.t.Logf("the old leader %s logged on waking at %s writes it had sent before it was frozen:\n\t%s",
			id, cont.UTC().Format("15:04:05.000"), bulleted(inFlight))
	}
	if len(writes) > 0 {
		// Not fatal: the outcome checked next tells what those writes did.
		c.t.Errorf("the old leader %s wrote after waking at %s, without the lease:\n\t%s",
			id, cont.UTC().Format("15:04:05.000"), bulleted(writes))
	}
}

// restartedBetween reports whether a pod template of the Deployment carries
// a restart timestamp from from to to (both included).
func (c *cell) restartedBetween(ns, name string, from, to time.Time) bool {
	c.t.Helper()
	rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctxFor(c.t), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, rs := range rss.Items {
		at, err := time.Parse(time.RFC3339Nano, rs.Spec.Template.Annotations[c.keys.timestamp])
		if err == nil && !at.Before(from) && !at.After(to) {
			return true
		}
	}
	return false
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
// the breaker holds them (budget 2 within 90s); then the changes stop. The
// held restarts must go within the quiet time (15s) plus a margin, each
// workload exactly once after it was held, with every hold gone, and
// none of the held ones before the quiet time.
func TestResumeBreakerHold(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) {
		// The quiet time is three rounds of changes long: a round delayed
		// on a loaded machine must not look like the sources going still,
		// which (rightly) restarts a held workload once more.
		const quiet = 15 * time.Second
		c := newCell(t, mode, "rbreak", "30s", "1s", func(cfg map[string]interface{}) {
			cfg["breaker"] = map[string]interface{}{"budget": 2, "window": "90s", "quiet": quiet.String()}
		})
		f := newSharedFleet(t, c.ns, c.keys, c.node, 12, 4, sharedOptions{})
		c.start()
		f.waitReady(t)

		// Every source changes every 5s until every workload is held.
		var last time.Time
		var heldNames []string
		var holds map[string]holdRecord
		// Each workload's pod templates once all are held: a held workload
		// restarts exactly once more, when released. (Counting from the
		// last round's first update would also count a restart that round's
		// first change gave before a later one of the same round was held: on
		// a loaded machine the round's four updates can span the grace period.)
		var heldAt map[string]int
		for round, end := 1, time.Now().Add(90*time.Second); ; round++ {
			last = time.Now()
			for _, src := range f.sources {
				setConfigMapKey(t, c.ns, src, "v", fmt.Sprint(round))
			}
			time.Sleep(5 * time.Second)
			ws := f.mustRead(t)
			heldNames, holds = held(t, ws)
			heldAt = counts(ws)
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
			now := counts(f.mustRead(t))
			for _, name := range f.names {
				if n := now[name] - heldAt[name]; n != 1 {
					return fmt.Errorf("%s restarted %d times after it was held, want exactly 1 (the merged changes); %d after the last round began",
						name, n, f.restartsAfter(t, last)[name])
				}
			}
			if now := counts(f.mustRead(t)); fmt.Sprint(now) != fmt.Sprint(counts(settled)) {
				return fmt.Errorf("ReplicaSets %v, then %v", counts(settled), now)
			}
			return nil
		})
	})
}

// staysCounted fails unless, for d, every workload has exactly the
// ReplicaSets want names (restarts + 1), no hold is left, and each of
// complete has a rollout record of a complete rollout.
func (f *sharedFleet) staysCounted(t *testing.T, what string, d time.Duration, want map[string]int, complete []string) {
	t.Helper()
	stays(t, what, d, func() error {
		ws, err := f.read(t)
		if err != nil {
			return err
		}
		if names, _ := held(t, ws); len(names) != 0 {
			return fmt.Errorf("holds left: %v", names)
		}
		for _, name := range complete {
			if r := ws[name].record; r.Result != "complete" {
				return fmt.Errorf("%s: rollout record %+v, want complete", name, r)
			}
		}
		return expectCounts(ws, want)
	})
}

// expectCounts fails unless every workload has exactly the ReplicaSets
// want names (restarts + 1), want holding for every workload of the fleet.
func expectCounts(ws map[string]workload, want map[string]int) error {
	var wrong []string
	for name, n := range want {
		if got := ws[name].replicaSets; got != n {
			wrong = append(wrong, fmt.Sprintf("%s: %d restarts, want %d", name, got-1, n-1))
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		return fmt.Errorf("%s", strings.Join(wrong, "; "))
	}
	return nil
}

// Rows 2 and 6, a wave hold after a failed rollout and then a released hold:
// a bad change of src-0 reaches the first of its six readers, whose pods never
// become ready; its rollout fails at the deadline (8s) and the five others
// are held, for that change, and no one else is touched. The mode strikes:
// the holds must stay, and nothing restart, while nothing changes. Then the
// operator heals the pods and releases the change with the annotation, and
// the mode strikes again right away: the five held ones restart exactly once
// each, the failed one not again, every hold gone, and the workloads that do
// not read src-0 were never restarted.
func TestResumeWaveHoldAndRelease(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) { waveHoldRow(t, mode, false) })
}

// Row 2 ended the other way: the same wave hold, the mode strikes, the holds
// stay; then the pods are healed and src-0 changes again (the fix), and the
// mode strikes again right away. The new change starts its own waves from
// the first: the failed workload is restarted again, then, in waves each
// after the one before completed, the five held ones exactly once each; no
// hold is left and no one else was restarted.
func TestResumeWaveHoldNewChange(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) { waveHoldRow(t, mode, true) })
}

func waveHoldRow(t *testing.T, mode resumeMode, endByNewChange bool) {
	prefix := "rwave"
	if endByNewChange {
		prefix = "rwavefix"
	}
	c := newCell(t, mode, prefix, "8s", "1s", nil)
	f := newSharedFleet(t, c.ns, c.keys, c.node, 12, 4, sharedOptions{})
	c.start()
	f.waitReady(t)
	readers := f.readersOf("src-0")
	first, rest := readers[0], readers[1:]
	want := map[string]int{}
	for _, name := range f.names {
		want[name] = 1
	}
	want[first] = 2

	c.node.neverReady(t, probeLabel, probeValue)
	setConfigMapKey(t, c.ns, "src-0", "v", "bad")
	source := sourceID("configmap", c.ns, "src-0")
	var change string
	heldAsDue := func() error {
		ws, err := f.read(t)
		if err != nil {
			return err
		}
		if err := expectCounts(ws, want); err != nil {
			return err
		}
		if r := ws[first].record; r.Result != "failed" {
			return fmt.Errorf("%s: rollout record %+v, want failed", first, r)
		}
		names, holds := held(t, ws)
		if fmt.Sprint(names) != fmt.Sprint(rest) {
			return fmt.Errorf("held %v, want %v", names, rest)
		}
		for _, name := range names {
			h := holds[name]
			if h.Kind != "wave" || h.Source != source || !strings.Contains(h.Cause, first) || (change != "" && h.Change != change) {
				return fmt.Errorf("%s: hold %+v, want a wave hold for %s caused by %s", name, h, source, first)
			}
			change = h.Change
		}
		return nil
	}
	waitFor(t, "the first wave failed and the rest of src-0's readers held", func() (bool, error) { return heldAsDue() == nil, heldAsDue() })

	took := c.disrupt()
	// The new leader decides every workload at start: give it that, then
	// the holds must still be there and nothing restarted.
	time.Sleep(time.Until(took.Add(2 * time.Second)))
	stays(t, "held while nothing changes, "+string(mode), 6*time.Second, heldAsDue)

	c.node.heal(t)
	if endByNewChange {
		// What ends it: a new change of the source.
		changed := time.Now()
		setConfigMapKey(t, c.ns, "src-0", "v", "fixed")
		c.disrupt()
		want[first] = 3
		for _, name := range rest {
			want[name] = 2
		}
		f.truth(t, c.ns, readers, changed, changed.Add(c.takeover()+45*time.Second), "wave hold ended by a new change, "+string(mode))
		ws := f.mustRead(t)
		for _, name := range readers {
			if r := ws[name].record; r.Result != "complete" {
				t.Fatalf("%s: rollout record %+v, want complete", name, r)
			}
		}
		checkWaves(t, readers, ws)
		f.staysCounted(t, "the new change restarted its readers once each (the failed one again), no one else", 4*time.Second, want, nil)
		return
	}
	// What ends it: the release annotation.
	released := time.Now()
	annotateConfigMap(t, c.ns, "src-0", map[string]string{c.keys.release: change})
	took = c.disrupt()
	for _, name := range rest {
		want[name] = 2
	}
	deadline := released.Add(c.takeover() + 45*time.Second)
	f.truth(t, c.ns, rest, released, deadline, "released wave hold, "+string(mode))
	f.staysCounted(t, "each held workload restarted once, the failed one not again", 4*time.Second, want, nil)
	t.Logf("%s: released %s after the takeover at %s; all held restarted by %s", mode, change, took.Format(time.RFC3339), time.Now().Format(time.RFC3339))
}

// Rows 3 and 4, a wave in progress and a rollout record whose rollout is
// still running: every rollout takes at least 5s (minReadySeconds), and
// src-0 changes; while the first wave's rollout runs (its record has no
// outcome yet) and the other five readers wait, the mode strikes. The record
// must be followed to its outcome (complete) and the waves carried on: each
// reader restarted exactly once, each wave only after the one before had
// completed, no one else restarted, no hold.
func TestResumeWaveInProgress(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) {
		c := newCell(t, mode, "rprog", "1m", "1s", nil)
		f := newSharedFleet(t, c.ns, c.keys, c.node, 12, 4, sharedOptions{minReadySeconds: 5})
		c.start()
		f.waitReady(t)
		readers := f.readersOf("src-0")
		changed := time.Now()
		setConfigMapKey(t, c.ns, "src-0", "v", "1")
		waitFor(t, "the first wave's rollout under way", func() (bool, error) {
			ws, err := f.read(t)
			if err != nil {
				return false, err
			}
			if got := restarted(ws); fmt.Sprint(got) != fmt.Sprint(readers[:1]) {
				return false, fmt.Errorf("restarted %v, want %v", got, readers[:1])
			}
			if r := ws[readers[0]].record; r.Result != "" {
				t.Fatalf("%s's rollout had an outcome (%+v) before the mode struck: minReadySeconds too short", readers[0], r)
			}
			return true, nil
		})
		c.disrupt()
		f.truth(t, c.ns, readers, changed, changed.Add(c.takeover()+60*time.Second), "wave in progress, "+string(mode))
		ws := f.mustRead(t)
		for _, name := range readers {
			if r := ws[name].record; r.Result != "complete" {
				t.Fatalf("%s: rollout record %+v, want complete", name, r)
			}
		}
		checkWaves(t, readers, ws)
		want := map[string]int{}
		for _, name := range f.names {
			want[name] = 1
		}
		for _, name := range readers {
			want[name] = 2
		}
		f.staysCounted(t, "each reader restarted once, no one else", 4*time.Second, want, nil)
	})
}

// Row 5, a change inside its grace period (8s): src-0 and src-1 change
// together and the mode strikes 1s later. Their nine readers (three read
// both) restart exactly once each, within the grace period, the takeover
// and the waves plus a margin; in one process not before the grace period
// ends; the three workloads reading neither are not restarted.
func TestResumeInsideGrace(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) {
		const grace = 8 * time.Second
		c := newCell(t, mode, "rgrace", "1m", "8s", nil)
		f := newSharedFleet(t, c.ns, c.keys, c.node, 12, 4, sharedOptions{})
		c.start()
		f.waitReady(t)
		readers := map[string]bool{}
		for _, src := range []string{"src-0", "src-1"} {
			for _, name := range f.readersOf(src) {
				readers[name] = true
			}
		}
		var names []string
		want := map[string]int{}
		for _, name := range f.names {
			want[name] = 1
			if readers[name] {
				names = append(names, name)
				want[name] = 2
			}
		}
		changed := time.Now()
		setConfigMapKey(t, c.ns, "src-0", "v", "1")
		setConfigMapKey(t, c.ns, "src-1", "v", "1")
		time.Sleep(time.Second) // inside the grace period: the state to resume
		if got := restarted(f.mustRead(t)); len(got) != 0 {
			t.Fatalf("restarted %v inside the grace period", got)
		}
		c.disrupt()
		f.truth(t, c.ns, names, changed, changed.Add(grace+c.takeover()+40*time.Second), "change inside its grace period, "+string(mode))
		if mode == oneProcess {
			for _, name := range names {
				if at := f.mustRead(t)[name].record.At; at.Sub(changed) < grace {
					t.Fatalf("%s restarted %s after the change, inside the grace period of %s", name, at.Sub(changed), grace)
				}
			}
		}
		f.staysCounted(t, "each reader restarted once, no one else", 4*time.Second, want, nil)
	})
}

// Row 7, checksums recorded without a restart: src-3 carries the ignore
// annotation and app-00 ignores src-0 by its ignore-sources annotation;
// src-3 and src-0 change. The readers of src-3 and app-00 record the new
// checksums and are not restarted; the other readers of src-0 restart once.
// Then the mode strikes: nothing more restarts (what was recorded is not a
// pending change). The witness: src-1 changes, and its readers (app-00
// among them) restart, so a restart was possible all along.
func TestResumeRecordedWithoutRestart(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) {
		c := newCell(t, mode, "roptout", "1m", "1s", nil)
		f := newSharedFleet(t, c.ns, c.keys, c.node, 12, 4, sharedOptions{})
		annotateConfigMap(t, c.ns, "src-3", map[string]string{c.keys.ignore: "true"})
		// A merge patch: a read and an update would conflict with
		// kube-controller-manager's status writes.
		ignore := []byte(`{"metadata":{"annotations":{"` + c.keys.ignoreSources + `":"configmap/src-0"}}}`)
		if _, err := env.kube.AppsV1().Deployments(c.ns).Patch(ctxFor(t), "app-00", types.MergePatchType, ignore, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		c.start()
		f.waitReady(t)
		want := map[string]int{}
		for _, name := range f.names {
			want[name] = 1
		}
		for _, name := range f.readersOf("src-0") {
			if name != "app-00" {
				want[name] = 2
			}
		}
		changed := time.Now()
		setConfigMapKey(t, c.ns, "src-3", "v", "1")
		setConfigMapKey(t, c.ns, "src-0", "v", "1")
		// Recorded: every reader's applied checksums are the current data.
		var all []string
		for _, name := range f.names {
			if want[name] == 2 {
				all = append(all, name)
			}
		}
		f.truth(t, c.ns, all, changed, changed.Add(40*time.Second), "restarts for src-0")
		recorded := func() error {
			ws, err := f.read(t)
			if err != nil {
				return err
			}
			if err := expectCounts(ws, want); err != nil {
				return err
			}
			list, err := env.kube.AppsV1().Deployments(c.ns).List(ctxFor(t), metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, d := range list.Items {
				applied := map[string]string{}
				if err := json.Unmarshal([]byte(d.Annotations[c.keys.applied]), &applied); err != nil {
					return fmt.Errorf("%s: applied %q", d.Name, d.Annotations[c.keys.applied])
				}
				for _, src := range f.readers[d.Name] {
					if src != "src-0" && src != "src-3" {
						continue
					}
					cm, err := env.kube.CoreV1().ConfigMaps(c.ns).Get(ctxFor(t), src, metav1.GetOptions{})
					if err != nil {
						return err
					}
					sum, err := configMapChecksumIn(c.ns, cm, nil)
					if err != nil {
						return err
					}
					if got := applied[sourceID("configmap", c.ns, src)]; got != sum {
						return fmt.Errorf("%s: applied %s %q, current %q: not recorded", d.Name, src, got, sum)
					}
				}
			}
			return nil
		}
		waitFor(t, "the opted-out changes recorded without a restart", func() (bool, error) { return recorded() == nil, recorded() })
		took := c.disrupt()
		time.Sleep(time.Until(took.Add(2 * time.Second)))
		stays(t, "nothing restarted for the recorded changes, "+string(mode), 6*time.Second, recorded)

		witnessed := time.Now()
		setConfigMapKey(t, c.ns, "src-1", "v", "1")
		witnesses := f.readersOf("src-1")
		f.truth(t, c.ns, witnesses, witnessed, witnessed.Add(40*time.Second), "witness change of src-1")
		for _, name := range witnesses {
			want[name]++
		}
		stays(t, "the witness change restarted its readers once", 3*time.Second, func() error {
			ws, err := f.read(t)
			if err != nil {
				return err
			}
			return expectCounts(ws, want)
		})
	})
}

// Row 8, a half-applied hot reload of the config: while src-0's first wave
// rolls out (minReadySeconds 4s), the config file is first torn (a write
// cut short: refused, the running config stays in force), then rewritten
// whole with other waves (firstWave 2), and the mode strikes at once, while
// the reload is put in force. Whoever leads afterwards runs the new file;
// every reader of src-0 is restarted exactly once, its rollout followed to
// completion; no one else is restarted and no hold is left.
func TestResumeHalfAppliedReload(t *testing.T) {
	matrix(t, func(t *testing.T, mode resumeMode) {
		c := newCell(t, mode, "rreload", "1m", "1s", nil)
		f := newSharedFleet(t, c.ns, c.keys, c.node, 12, 4, sharedOptions{minReadySeconds: 4})
		c.start()
		f.waitReady(t)
		readers := f.readersOf("src-0")
		changed := time.Now()
		setConfigMapKey(t, c.ns, "src-0", "v", "1")
		waitFor(t, "the first wave's rollout under way", func() (bool, error) {
			if got := restarted(f.mustRead(t)); fmt.Sprint(got) != fmt.Sprint(readers[:1]) {
				return false, fmt.Errorf("restarted %v, want %v", got, readers[:1])
			}
			return true, nil
		})

		leader := c.leader()
		if err := os.WriteFile(c.configFile, []byte("waves: {firstWave: 2, gro"), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the torn config file refused", func() (bool, error) {
			v, err := leader.Metric("restart_controller_config_last_reload_successful")
			return err == nil && v == 0, err
		})
		c.writeConfig(func(cfg map[string]interface{}) {
			cfg["waves"] = map[string]interface{}{"unpacedUpTo": 3, "firstWave": 2, "growth": 2, "maxInFlight": 50}
		})
		content, err := os.ReadFile(c.configFile)
		if err != nil {
			t.Fatal(err)
		}
		c.disrupt()
		// Whoever leads now runs the whole new file.
		wantHash := fmt.Sprintf("%x", sha256.Sum256(content))[:12]
		waitFor(t, "the leader running the new config file", func() (bool, error) {
			h, err := metricLabel(c.leader(), "restart_controller_config_info", "hash")
			if err != nil {
				return false, err
			}
			if h != wantHash {
				return false, fmt.Errorf("config hash %s, want %s", h, wantHash)
			}
			return true, nil
		})
		f.truth(t, c.ns, readers, changed, changed.Add(c.takeover()+60*time.Second), "half-applied reload, "+string(mode))
		want := map[string]int{}
		for _, name := range f.names {
			want[name] = 1
		}
		for _, name := range readers {
			want[name] = 2
		}
		f.staysCounted(t, "each reader restarted once, no one else", 4*time.Second, want, readers)
	})
}
