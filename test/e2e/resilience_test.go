package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// fleet is a set of workloads over a set of configs, with the time of the
// last change of each config as the test saw it return from the API.
type fleet struct {
	ns       string
	keys     isolatedKeys
	configs  []string
	readers  map[string][]string // workload -> configs it reads
	mu       sync.Mutex
	last     map[string]time.Time
	changes  int
	counters map[string]int
}

// newFleet creates configs and Deployments (no replicas: these tests count
// pod-template changes and must not drown two cores in pod churn). Workload i
// reads two configs, through envFrom and a volume.
func newFleet(t *testing.T, ns string, keys isolatedKeys, workloads, configs int) *fleet {
	t.Helper()
	f := &fleet{ns: ns, keys: keys, readers: map[string][]string{}, last: map[string]time.Time{}, counters: map[string]int{}}
	for i := 0; i < configs; i++ {
		name := fmt.Sprintf("cfg-%02d", i)
		createConfigMap(t, ns, name, map[string]string{"v": "0"})
		f.configs = append(f.configs, name)
	}
	zero := int32(0)
	for i := 0; i < workloads; i++ {
		name := fmt.Sprintf("app-%02d", i)
		a, b := f.configs[i%configs], f.configs[(i*7+3)%configs]
		f.readers[name] = []string{a, b}
		spec := podSpec(t, fmt.Sprintf(`
containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: %s}}]}]
volumes: [{name: v, configMap: {name: %s}}]`, a, b))
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}},
			Spec: appsv1.DeploymentSpec{
				Replicas: &zero,
				Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
			},
		}
		if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fleet) waitRecorded(t *testing.T) {
	t.Helper()
	waitFor(t, "every workload recorded", func() (bool, error) {
		list, err := env.kube.AppsV1().Deployments(f.ns).List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range list.Items {
			if _, ok := d.Annotations[f.keys.applied]; !ok {
				return false, fmt.Errorf("%s not recorded", d.Name)
			}
		}
		return len(list.Items) == len(f.readers), nil
	})
}

// change updates one config and remembers when the update had returned: the
// change was committed by then, so a restart for it must come later.
func (f *fleet) change(ctx context.Context, name string) error {
	f.mu.Lock()
	f.counters[name]++
	value := fmt.Sprint(f.counters[name])
	f.mu.Unlock()
	cm, err := env.kube.CoreV1().ConfigMaps(f.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cm.Data["v"] = value
	if _, err := env.kube.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	f.mu.Lock()
	f.last[name] = time.Now()
	f.changes++
	f.mu.Unlock()
	return nil
}

// changeEvery changes a random config every period until ctx ends.
func (f *fleet) changeEvery(ctx context.Context, t *testing.T, period time.Duration) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if err := f.change(ctx, f.configs[rand.IntN(len(f.configs))]); err != nil && ctx.Err() == nil {
				t.Logf("config change failed (the API may be down on purpose): %v", err)
			}
		}
	}
}

// startChanging runs changeEvery in the background; the returned stop ends it
// and waits until no change is under way.
func (f *fleet) startChanging(ctx context.Context, t *testing.T, period time.Duration) (stop func()) {
	changeCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.changeEvery(changeCtx, t, period)
	}()
	return func() {
		cancel()
		<-done
	}
}

// waitAllRestartedAfterLastChange is the no-miss proof: every workload's
// restart timestamp is later than the last change of every config it reads.
// It returns the number of restarts (new ReplicaSets) of the fleet.
func (f *fleet) waitAllRestartedAfterLastChange(t *testing.T) int {
	t.Helper()
	f.mu.Lock()
	last := make(map[string]time.Time, len(f.last))
	for k, v := range f.last {
		last[k] = v
	}
	f.mu.Unlock()
	waitFor(t, "every workload restarted after the last change of its configs", func() (bool, error) {
		list, err := env.kube.AppsV1().Deployments(f.ns).List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range list.Items {
			// The ReplicaSets counted below exist once the deployment
			// controller has seen the latest template.
			if d.Status.ObservedGeneration != d.Generation {
				return false, fmt.Errorf("%s: deployment controller behind", d.Name)
			}
			stamp, err := time.Parse(time.RFC3339Nano, d.Spec.Template.Annotations[f.keys.timestamp])
			for _, cfg := range f.readers[d.Name] {
				changed, ok := last[cfg]
				if ok && (err != nil || !stamp.After(changed)) {
					return false, fmt.Errorf("%s restarted at %q, before the last change of %s at %s",
						d.Name, d.Spec.Template.Annotations[f.keys.timestamp], cfg, changed.Format(time.RFC3339Nano))
				}
			}
		}
		return true, nil
	})
	rss, err := env.kube.AppsV1().ReplicaSets(f.ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(rss.Items) - len(f.readers)
}

// The seed design could lose a change when killed inside a grace period. Here
// the controller is SIGKILLed at random moments at least 20 times while
// configs change every 150 ms for a minute; afterwards no workload may have
// missed its restart.
func TestChaosKillNineLosesNoRestart(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("chaos")
	f := newFleet(t, ns, keys, 50, 20)
	configFile := isolatedConfig(t, "chaos", ns, keys, nil)
	args := []string{"--restart-grace-period", "500ms", "--restart-check-period", "100"}
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "chaos", configFile, args...)
	if err != nil {
		t.Fatal(err)
	}
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
	restarts := f.waitAllRestartedAfterLastChange(t)
	t.Logf("chaos: %d SIGKILLs, %d config changes, %d restarts over %d workloads, zero missed", kills, f.changes, restarts, len(f.readers))
	p.Stop()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("controller exit code after SIGTERM: %d\n%s", code, p.LogTail(30))
	}
}

// Two replicas share a Lease; the leader is killed while configs change. The
// standby takes over and honours every change.
func TestLeaderFailover(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("failover")
	f := newFleet(t, ns, keys, 12, 6)
	configFile := isolatedConfig(t, "failover", ns, keys, func(cfg map[string]interface{}) {
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
	}
	holder := func() string {
		lease, err := env.kube.CoordinationV1().Leases(ns).Get(ctx, "restart-controller", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	waitFor(t, "a leader", func() (bool, error) { return holder() != "", nil })
	f.waitRecorded(t)

	stopChanges := f.startChanging(ctx, t, 200*time.Millisecond)
	time.Sleep(3 * time.Second) // let changes flow to the first leader
	leader := holder()
	replicas[leader].Kill()
	killed := time.Now()
	var survivor string
	for id := range replicas {
		if id != leader {
			survivor = id
		}
	}
	waitFor(t, "the standby to take the lease", func() (bool, error) { return holder() == survivor, nil })
	failover := time.Since(killed)
	time.Sleep(3 * time.Second) // changes keep flowing to the new leader
	stopChanges()
	restarts := f.waitAllRestartedAfterLastChange(t)
	t.Logf("failover: leader %s killed, %s took over after %s (lease duration 4s); %d changes, %d restarts, zero missed",
		leader, survivor, failover.Round(10*time.Millisecond), f.changes, restarts)
	if v, err := replicas[survivor].Metric("restart_controller_leader"); err != nil || v != 1 {
		t.Fatalf("survivor does not report leadership: %v %v", v, err)
	}
}

// kube-apiserver goes away for 10 s while changes are waiting in their grace
// period; when it is back, nothing is lost and the controller never exited.
func TestAPIServerOutage(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("outage")
	f := newFleet(t, ns, keys, 10, 5)
	configFile := isolatedConfig(t, "outage", ns, keys, nil)
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "outage", configFile, "--restart-grace-period", "2s")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	f.waitRecorded(t)

	for _, cfg := range f.configs[:3] {
		if err := f.change(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	// The API server stops inside those changes' grace period.
	if err := env.cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	if err := env.cluster.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range f.configs[2:] {
		if err := f.change(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	restarts := f.waitAllRestartedAfterLastChange(t)
	select {
	case <-p.done:
		t.Fatalf("controller exited during the outage:\n%s", p.LogTail(30))
	default:
	}
	t.Logf("outage: 10s without kube-apiserver; %d changes, %d restarts, zero missed", f.changes, restarts)
}
