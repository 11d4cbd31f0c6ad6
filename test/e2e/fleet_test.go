package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fleet is a set of Deployments over a set of source ConfigMaps, driven by a
// test's own controller (its own annotation keys), with what the test did to
// the sources: when the last update of each returned, and how many updates
// were tried. The value of key "v" of a source is the number of updates tried
// on it, so versions only grow and never repeat.
type fleet struct {
	ns string
	// keyNS is where the fleet's controller keeps its checksum key (its
	// leaderElection.namespace).
	keyNS   string
	keys    isolatedKeys
	sources []string
	readers map[string][]string // workload -> the distinct sources it reads
	// holdKey, when set, is the fleet controller's hold annotation: check
	// then wants none left, and names the holds of stale workloads.
	holdKey string
	// within, when set, bounds check's wait from the last change instead
	// of waitLong from the call.
	within time.Duration

	mu       sync.Mutex
	last     map[string]time.Time // source -> when its last successful update returned
	changes  int                  // successful updates
	attempts map[string]int       // source -> updates tried: an upper bound of its data versions
}

// newFleet creates sources and Deployments (no replicas: these tests count
// pod-template changes and must not drown two cores in pod churn; and every
// ReplicaSet is kept, one per template, so they count restarts). Workload i
// reads two sources, through envFrom and a volume (one, if both are the same).
func newFleet(t *testing.T, ns string, keys isolatedKeys, workloads, sources int) *fleet {
	t.Helper()
	f := &fleet{ns: ns, keyNS: defaultKeyNamespace, keys: keys, readers: map[string][]string{}, last: map[string]time.Time{}, attempts: map[string]int{}}
	for i := 0; i < sources; i++ {
		name := fmt.Sprintf("src-%02d", i)
		createConfigMap(t, ns, name, map[string]string{"v": "0"})
		f.sources = append(f.sources, name)
	}
	zero, keepAll := int32(0), int32(100000)
	for i := 0; i < workloads; i++ {
		name := fmt.Sprintf("app-%02d", i)
		a, b := f.sources[i%sources], f.sources[(i*7+3)%sources]
		f.readers[name] = []string{a}
		if b != a {
			f.readers[name] = append(f.readers[name], b)
		}
		spec := podSpec(t, fmt.Sprintf(`
containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: %s}}]}]
volumes: [{name: v, configMap: {name: %s}}]`, a, b))
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}},
			Spec: appsv1.DeploymentSpec{
				Replicas:             &zero,
				RevisionHistoryLimit: &keepAll,
				Selector:             &metav1.LabelSelector{MatchLabels: labelsFor(name)},
				Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
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

// change updates one source and remembers when the update had returned: the
// change was committed by then, so a restart for it must come later.
func (f *fleet) change(ctx context.Context, name string) error {
	f.mu.Lock()
	f.attempts[name]++
	value := fmt.Sprint(f.attempts[name])
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

// changeEvery changes a random source every period until ctx ends.
func (f *fleet) changeEvery(ctx context.Context, t *testing.T, period time.Duration) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if err := f.change(ctx, f.sources[rand.IntN(len(f.sources))]); err != nil && ctx.Err() == nil {
				t.Logf("source change failed (the API may be down on purpose): %v", err)
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

// fleetReport is what check found once the fleet had converged.
type fleetReport struct {
	changes  int // source updates that returned success
	restarts int // new ReplicaSets over the fleet (each restart makes one)
	// bound is the most restarts a controller that never restarts twice for
	// one change can make: over the workloads, the updates tried on the
	// sources each reads (a restart records the sources' data, and versions
	// only grow, so every further restart needs a further version).
	bound int
}

func (r fleetReport) String() string {
	return fmt.Sprintf("%d source changes, %d restarts (at most %d possible without a double restart)", r.changes, r.restarts, r.bound)
}

// check is the fleet's proof, once changes have stopped. It waits until, for
// every workload,
//
//   - its applied checksums annotation is exactly the checksums of the current
//     data of the sources it reads, computed here from the ConfigMaps as the
//     API server returns them now: a restart decided on stale data records
//     stale checksums and never gets here;
//   - its pods' template is the latest: the deployment controller observed the
//     latest generation, and the restart timestamp in the template is later
//     than the last change of every source it reads;
//
// and then, from the ReplicaSets (one per restart), that no workload was
// restarted more often than the versions of its sources allow, and that each
// restart recorded newer data than the one before (see checkHistory): no
// double restart for one change, no decision on data older than a previous
// one. Reaching the deadline fails with every workload still wrong and why.
func (f *fleet) check(t *testing.T) fleetReport {
	t.Helper()
	f.mu.Lock()
	last := make(map[string]time.Time, len(f.last))
	for k, v := range f.last {
		last[k] = v
	}
	attempts := make(map[string]int, len(f.attempts))
	for k, v := range f.attempts {
		attempts[k] = v
	}
	report := fleetReport{changes: f.changes}
	f.mu.Unlock()

	ctx := ctxFor(t)
	bound, deadline := waitLong, time.Now().Add(waitLong)
	if f.within > 0 {
		var lastChange time.Time
		for _, at := range last {
			if at.After(lastChange) {
				lastChange = at
			}
		}
		bound, deadline = f.within, lastChange.Add(f.within)
	}
	converged := pollUntil(deadline, func() (bool, error) {
		current := map[string]string{} // "configmap/NS/NAME" -> checksum of its data now
		currentVersion := map[string]string{}
		cms, err := env.kube.CoreV1().ConfigMaps(f.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range cms.Items {
			cm := &cms.Items[i]
			sum, err := configMapChecksumIn(f.keyNS, cm, nil)
			if err != nil {
				return false, err
			}
			id := sourceID("configmap", f.ns, cm.Name)
			current[id] = sum
			currentVersion[id+"="+sum] = cm.Data["v"]
		}
		// A stale checksum is named by the version it was taken of.
		describe := func(id, sum string) string {
			if v, ok := currentVersion[id+"="+sum]; ok {
				return fmt.Sprintf("%s (v=%s, current)", sum, v)
			}
			if v := f.versionOf(sum, attempts[id[strings.LastIndex(id, "/")+1:]]); v >= 0 {
				return fmt.Sprintf("%s (v=%d, stale)", sum, v)
			}
			return fmt.Sprintf("%q (no version of the source)", sum)
		}
		list, err := env.kube.AppsV1().Deployments(f.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(list.Items) != len(f.readers) {
			return false, fmt.Errorf("%d deployments, want %d", len(list.Items), len(f.readers))
		}
		var wrong []string
		for _, d := range list.Items {
			if f.holdKey != "" && d.Annotations[f.holdKey] != "" {
				wrong = append(wrong, fmt.Sprintf("%s: held: %s", d.Name, d.Annotations[f.holdKey]))
			}
			want := map[string]string{}
			for _, src := range f.readers[d.Name] {
				id := sourceID("configmap", f.ns, src)
				want[id] = current[id]
			}
			applied := map[string]string{}
			if err := json.Unmarshal([]byte(d.Annotations[f.keys.applied]), &applied); err != nil {
				wrong = append(wrong, fmt.Sprintf("%s: unreadable applied checksums %q", d.Name, d.Annotations[f.keys.applied]))
				continue
			}
			for id, sum := range want {
				if applied[id] != sum {
					wrong = append(wrong, fmt.Sprintf("%s: applied %s = %s, but its data now has %s",
						d.Name, id, describe(id, applied[id]), describe(id, sum)))
				}
			}
			for id := range applied {
				if _, ok := want[id]; !ok {
					wrong = append(wrong, fmt.Sprintf("%s: applied checksums name %s, which it does not read", d.Name, id))
				}
			}
			if d.Status.ObservedGeneration != d.Generation {
				wrong = append(wrong, fmt.Sprintf("%s: deployment controller at generation %d of %d", d.Name, d.Status.ObservedGeneration, d.Generation))
			}
			raw := d.Spec.Template.Annotations[f.keys.timestamp]
			stamp, err := time.Parse(time.RFC3339Nano, raw)
			for _, src := range f.readers[d.Name] {
				if changed, ok := last[src]; ok && (err != nil || !stamp.After(changed)) {
					wrong = append(wrong, fmt.Sprintf("%s: restarted at %q, not after the last change of %s at %s",
						d.Name, raw, src, changed.Format(time.RFC3339Nano)))
				}
			}
		}
		if len(wrong) > 0 {
			sort.Strings(wrong)
			return false, fmt.Errorf("%d problem(s):\n\t%s", len(wrong), bulleted(wrong))
		}
		return true, nil
	})

	// Once converged, every workload's ReplicaSet for its latest template
	// exists; if not, the history so far may tell why.
	rss, err := env.kube.AppsV1().ReplicaSets(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicaSets := map[string][]appsv1.ReplicaSet{}
	for _, rs := range rss.Items {
		replicaSets[rs.Labels["app"]] = append(replicaSets[rs.Labels["app"]], rs)
	}
	var wrong []string
	for _, name := range sortedNames(f.readers) {
		restarts, bound := len(replicaSets[name])-1, 0
		for _, src := range f.readers[name] {
			bound += attempts[src]
		}
		report.restarts += restarts
		report.bound += bound
		if restarts > bound {
			wrong = append(wrong, fmt.Sprintf("%s: %d restarts for at most %d versions of %v", name, restarts, bound, f.readers[name]))
		}
		wrong = append(wrong, f.checkHistory(name, replicaSets[name], attempts)...)
	}
	switch {
	case converged != nil && len(wrong) > 0:
		t.Fatalf("timed out after %s waiting for every workload's applied checksums and template to match its sources' current data: %v\n"+
			"and restarts were not each for new data (%s):\n\t%s", bound, converged, report, bulleted(wrong))
	case converged != nil:
		t.Fatalf("timed out after %s waiting for every workload's applied checksums and template to match its sources' current data: %v", bound, converged)
	case len(wrong) > 0:
		t.Fatalf("restarts not each for new data (%s):\n\t%s", report, bulleted(wrong))
	}
	return report
}

// checkHistory checks every restart of a workload was for data newer than
// the restart before it. The deployment controller copies a Deployment's
// annotations to the ReplicaSet of its current template, so each ReplicaSet
// keeps the applied checksums recorded with its template's restart. In
// restart order, the versions of the sources they name must never go back
// (a decision on stale data) and must move at each restart (a restart
// without new data, twice for one change).
func (f *fleet) checkHistory(name string, rss []appsv1.ReplicaSet, attempts map[string]int) []string {
	type step struct {
		stamp    string
		at       time.Time      // zero for the first template
		versions map[string]int // source -> version, -1 if unknown
	}
	var steps []step
	for _, rs := range rss {
		raw, ok := rs.Annotations[f.keys.applied]
		if !ok {
			continue // the first template, created before the controller recorded it
		}
		applied := map[string]string{}
		if err := json.Unmarshal([]byte(raw), &applied); err != nil {
			return []string{fmt.Sprintf("%s: ReplicaSet %s has unreadable applied checksums %q", name, rs.Name, raw)}
		}
		st := step{stamp: rs.Spec.Template.Annotations[f.keys.timestamp], versions: map[string]int{}}
		if st.stamp != "" {
			at, err := time.Parse(time.RFC3339Nano, st.stamp)
			if err != nil {
				return []string{fmt.Sprintf("%s: ReplicaSet %s has restart timestamp %q: %v", name, rs.Name, st.stamp, err)}
			}
			st.at = at
		}
		for _, src := range f.readers[name] {
			st.versions[src] = f.versionOf(applied[sourceID("configmap", f.ns, src)], attempts[src])
		}
		steps = append(steps, st)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })
	var wrong []string
	for i := 1; i < len(steps); i++ {
		prev, cur := steps[i-1], steps[i]
		moved := false
		for _, src := range f.readers[name] {
			p, c := prev.versions[src], cur.versions[src]
			if p < 0 || c < 0 {
				wrong = append(wrong, fmt.Sprintf("%s: restart at %s recorded a checksum of %s that is no version of it", name, cur.stamp, src))
				moved = true
				continue
			}
			if c < p {
				wrong = append(wrong, fmt.Sprintf("%s: restart at %s recorded %s v=%d, older than v=%d recorded by the restart at %q (a decision on stale data)",
					name, cur.stamp, src, c, p, prev.stamp))
			}
			if c != p {
				moved = true
			}
		}
		if !moved {
			wrong = append(wrong, fmt.Sprintf("%s: restart at %s recorded the same data as the restart at %q (%v): restarted twice for one change",
				name, cur.stamp, prev.stamp, cur.versions))
		}
	}
	return wrong
}

// versionOf returns which value of key "v" (0 to max) a fleet source's
// checksum was taken of, or -1.
func (f *fleet) versionOf(checksum string, max int) int {
	for v := max; v >= 0; v-- {
		if sum, err := configMapChecksumIn(f.keyNS, &corev1.ConfigMap{Data: map[string]string{"v": fmt.Sprint(v)}}, nil); err == nil && sum == checksum {
			return v
		}
	}
	return -1
}

// bulleted joins at most 20 lines, one per line, saying how many more there are.
func bulleted(lines []string) string {
	const most = 20
	if len(lines) > most {
		lines = append(lines[:most:most], fmt.Sprintf("... and %d more", len(lines)-most))
	}
	return strings.Join(lines, "\n\t")
}

func sortedNames(m map[string][]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
