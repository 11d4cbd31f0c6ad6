package e2e

import (
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Chaos that ends in the truth, with fleet safety on: the breaker (budget 3
// within 60s, quiet 5s) and the waves (each source is read by about five
// workloads, each workload reads two sources, so every change is paced).
// The controller is SIGKILLed at random moments while sources change every
// 150ms for 45s, so the breaker trips, waves are cut off halfway and holds
// are left on the objects by processes that are gone. Once the changes stop,
// within the quiet time plus a margin after the last change, every
// workload's applied checksums must be its sources' final data, its template
// restarted after their last change, no hold left, and no workload
// restarted twice for one change: whether or not the breaker tripped.
func TestChaosBreakerKillNineEndsInTheTruth(t *testing.T) {
	t.Parallel()
	const quiet, margin = 5 * time.Second, 35 * time.Second
	ns := newNamespace(t)
	keys := safetyKeysFor("chaosbrk")
	f := newFleet(t, ns, keys.isolatedKeys, 50, 20)
	f.holdKey = keys.hold
	f.within = quiet + margin
	configFile := safetyConfig(t, "chaosbrk", ns, keys, "1m", func(cfg map[string]interface{}) {
		cfg["breaker"] = map[string]interface{}{"budget": 3, "window": "60s", "quiet": "5s"}
	})
	args := []string{"--restart-grace-period", "500ms", "--restart-check-period", "100"}
	ctx := ctxFor(t)
	p, err := env.startController(ctx, "chaosbrk", configFile, args...)
	if err != nil {
		t.Fatal(err)
	}
	logTailOnFailure(t, "chaosbrk", &p)
	t.Cleanup(func() { p.Kill() })
	f.waitRecorded(t)

	stopChanges := f.startChanging(ctx, t, 150*time.Millisecond)
	kills := 0
	for deadline := time.Now().Add(45 * time.Second); kills < 15 || time.Now().Before(deadline); {
		time.Sleep(time.Duration(300+rand.IntN(2200)) * time.Millisecond)
		p.Kill()
		kills++
		if p, err = env.startController(ctx, "chaosbrk", configFile, args...); err != nil {
			stopChanges()
			t.Fatal(err)
		}
	}
	stopChanges()
	// Whether the breaker tripped (holds on the objects when the changes
	// stopped) is reported, not required.
	heldAtEnd := 0
	list, err := env.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Items {
		if d.Annotations[keys.hold] != "" {
			heldAtEnd++
		}
	}
	report := f.check(t)
	t.Logf("chaos with the breaker: %d SIGKILLs over %d workloads; %s; %d held when the changes stopped; every workload on its final data within %s of the last change",
		kills, len(f.readers), report, heldAtEnd, f.within)
	p.Stop()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("controller exit code after SIGTERM: %d\n%s", code, p.LogTail(30))
	}
}
