package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// isolatedKeys gives a test's own controller its own annotation keys, so the
// suite's controller (default keys) never touches that test's workloads and
// the keys being configuration is exercised on the way.
type isolatedKeys struct{ optIn, applied, timestamp, templateHash string }

func keysFor(prefix string) isolatedKeys {
	return isolatedKeys{
		optIn:        prefix + ".e2e.example/restart",
		applied:      prefix + ".e2e.example/applied-config-checksums",
		timestamp:    prefix + ".e2e.example/timestamp",
		templateHash: prefix + ".e2e.example/applied-template-hash",
	}
}

// writeConfig writes examples/config.yaml with the given changes to a file.
func writeConfig(t *testing.T, name string, change func(map[string]interface{})) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.repoRoot, "examples", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	change(cfg)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(env.workDir, name+".yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// withoutBreaker turns the breaker off. The resilience tests change sources
// several times a second on purpose, to prove no change is lost; the breaker
// would (rightly) hold their workloads until the sources stay still, which
// fleet_safety_test.go proves on its own.
func withoutBreaker(cfg map[string]interface{}) {
	cfg["breaker"] = map[string]interface{}{"budget": 0}
}

func isolatedConfig(t *testing.T, name, ns string, keys isolatedKeys, extra func(map[string]interface{})) string {
	return writeConfig(t, name, func(cfg map[string]interface{}) {
		cfg["namespaces"] = []interface{}{ns}
		cfg["annotations"] = map[string]interface{}{
			"optIn": keys.optIn, "appliedChecksums": keys.applied,
			"restartTimestamp": keys.timestamp, "appliedTemplateHash": keys.templateHash,
		}
		if extra != nil {
			extra(cfg)
		}
	})
}

// The seed design could lose a change when killed inside a grace period. Here
// the controller is SIGKILLed at random moments at least 20 times while
// sources change every 150 ms for a minute; afterwards every workload's
// applied checksums are those of its sources' current data, its template
// was restarted after their last change, and none was restarted twice for
// one change.
func TestChaosKillNineLosesNoRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	keys := keysFor("chaos")
	f := newFleet(t, ns, keys, 50, 20)
	configFile := isolatedConfig(t, "chaos", ns, keys, withoutBreaker)
	args := []string{"--restart-grace-period", "500ms", "--restart-check-period", "100"}
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "chaos", configFile, args...)
	if err != nil {
		t.Fatal(err)
	}
	logTailOnFailure(t, "chaos", &p)
	// Whichever process is current when the test ends, even by failing, must
	// not outlive it (after the final Stop this does nothing).
	t.Cleanup(func() { p.Kill() })
	f.waitRecorded(t)

	stopChanges := f.startChanging(ctx, t, 150*time.Millisecond)
	kills := 0
	deadline := time.Now().Add(60 * time.Second)
	for kills < 20 || time.Now().Before(deadline) {
		// Random moments: inside grace periods, during patches, during sync.
		time.Sleep(time.Duration(300+rand.IntN(2200)) * time.Millisecond)
		p.Kill()
		kills++
		if p, err = env.startController(ctx, "chaos", configFile, args...); err != nil {
			stopChanges()
			t.Fatal(err)
		}
	}
	stopChanges()
	report := f.check(t)
	t.Logf("chaos: %d SIGKILLs over %d workloads; %s; every applied checksum current, zero missed", kills, len(f.readers), report)
	p.Stop()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("controller exit code after SIGTERM: %d\n%s", code, p.LogTail(30))
	}
}

// Not parallel: two lease holders with a 3 s renew deadline, and a check
// that the lease moved only by the kill, want a machine not loaded by
// other tests. (Sequential tests run before the parallel ones.)
//
// Two replicas share a Lease; the leader is killed while sources change,
// after it has restarted workloads. The standby takes over, restarts
// workloads itself, and every change is honoured.
func TestLeaderFailover(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("failover")
	f := newFleet(t, ns, keys, 12, 6)
	f.keyNS = ns // leader election in ns: its replicas keep their checksum key there
	configFile := isolatedConfig(t, "failover", ns, keys, func(cfg map[string]interface{}) {
		withoutBreaker(cfg)
		cfg["leaderElection"] = map[string]interface{}{
			"enabled": true, "namespace": ns, "leaseName": "restart-controller",
			"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms",
		}
	})
	ctx := ctxFor(t)
	args := []string{"--restart-grace-period", "1s"}
	replicas := map[string]*controllerProcess{}
	for _, id := range []string{"replica-a", "replica-b"} {
		p, err := env.startController(ctx, "failover-"+id, configFile, append(args, "--leader-election-identity", id)...)
		if err != nil {
			t.Fatal(err)
		}
		replicas[id] = p
		defer p.Stop()
		logTailOnFailure(t, id, &p)
	}
	holder := func() string {
		lease, err := env.kube.CoordinationV1().Leases(ns).Get(ctx, "restart-controller", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	const restartsMetric = "deployment_restart_controller_deployment_restarts_total"
	// waitRestarts waits until the replica has restarted workloads itself.
	waitRestarts := func(id, when string) float64 {
		var n float64
		waitFor(t, fmt.Sprintf("%s to restart workloads %s", id, when), func() (bool, error) {
			var err error
			n, err = replicas[id].Metric(restartsMetric)
			return n > 0, err
		})
		return n
	}
	waitFor(t, "a leader", func() (bool, error) { return holder() != "", nil })
	f.waitRecorded(t)

	stopChanges := f.startChanging(ctx, t, 200*time.Millisecond)
	leader := holder()
	var survivor string
	for id := range replicas {
		if id != leader {
			survivor = id
		}
	}
	// The first leader must have done work, or the failover proves nothing.
	leaderRestarts := waitRestarts(leader, "before it is killed")
	if h := holder(); h != leader {
		stopChanges()
		t.Fatalf("the lease moved from %s to %q without a kill", leader, h)
	}
	if n, err := replicas[survivor].Metric(restartsMetric); err != nil || n != 0 {
		stopChanges()
		t.Fatalf("the standby %s restarted %v workloads while %s held the lease (%v)", survivor, n, leader, err)
	}
	replicas[leader].Kill()
	killed := time.Now()
	waitFor(t, "the standby to take the lease", func() (bool, error) { return holder() == survivor, nil })
	failover := time.Since(killed)
	// Changes keep flowing until the new leader has restarted workloads itself.
	survivorRestarts := waitRestarts(survivor, "after taking over")
	stopChanges()
	report := f.check(t)
	t.Logf("failover: leader %s restarted %.0f workloads and was killed; %s took over after %s (lease duration 4s); %s; every applied checksum current",
		leader, leaderRestarts, survivor, failover.Round(10*time.Millisecond), report)
	if v, err := replicas[survivor].Metric("restart_controller_leader"); err != nil || v != 1 {
		t.Fatalf("survivor does not report leadership: %v %v", v, err)
	}
	if n, err := replicas[survivor].Metric(restartsMetric); err == nil {
		t.Logf("failover: %s restarted %.0f workloads in all (%.0f when first seen working)", survivor, n, survivorRestarts)
	}
}

// Not parallel: it stops the API server every test shares. Afterwards the
// suite's controller is blind for a while (client-go's watches come back
// with backoff), which the other tests' waits absorb.
//
// kube-apiserver goes away for 10 s while changes are waiting in their grace
// period; when it is back, nothing is lost and the controller never exited.
func TestAPIServerOutage(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("outage")
	f := newFleet(t, ns, keys, 10, 5)
	configFile := isolatedConfig(t, "outage", ns, keys, withoutBreaker)
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "outage", configFile, "--restart-grace-period", "2s")
	if err != nil {
		t.Fatal(err)
	}
	logTailOnFailure(t, "outage", &p)
	defer p.Stop()
	f.waitRecorded(t)

	for _, src := range f.sources[:3] {
		if err := f.change(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	// The API server stops inside those changes' grace period.
	if err := env.cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second) // the outage itself, not a wait for anything
	if err := env.cluster.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	for _, src := range f.sources[2:] {
		if err := f.change(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	report := f.check(t)
	select {
	case <-p.done:
		t.Fatalf("controller exited during the outage:\n%s", p.LogTail(30))
	default:
	}
	t.Logf("outage: 10s without kube-apiserver; %s; every applied checksum current", report)
}
