package status

import (
	"bytes"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/explain/explaintest"
)

var update = flag.Bool("update", false, "rewrite the golden files and the README's status example")

// incidentConfig has a restart window, and a cap of one paced rollout in
// flight so that one change's rollout keeps another's first wave waiting.
const incidentConfig = `
restartWindows: [{name: nights, schedule: "0 22 * * *", duration: 2h, timeZone: Europe/Berlin}]
waves: {maxInFlight: 1}
`

// incidentWorld is namespace "shop" in the middle of an incident: every
// reason a restart does not go now, in one place.
//
//	shared  read by app-00..09: app-00's restart for its change failed;
//	        app-01..05 carry wave holds, app-06..09 none yet: all held
//	fleet   read by f-00..05: f-00 rolling out, the others wait for wave 2
//	bulk    read by b-00..03: wave 1 admits b-00, but the cap (1) is reached
//	loop    read by worker, held by the breaker
//	flags   read by batch, which waits for its restart window
//	cache   read by api, restarted 30 minutes ago, minimum interval 1h
//	solo    read by web: due (unpaced)
//	creds   a Secret read by vault, which the caller may not list
//	calm    read by idle, up to date
func incidentWorld(t testing.TB) *world {
	w := newWorld(t, incidentConfig)
	a := w.cfg.Annotations
	src := map[string]catalog.SourceID{}
	for _, name := range []string{"shared", "fleet", "bulk", "loop", "flags", "cache", "solo", "calm"} {
		src[name] = w.source("configmap", "shop", name, map[string]string{"v": name + "-1"}) // a change of its own
	}
	src["creds"] = w.source("secret", "shop", "creds", map[string]string{"password": "hunter2-do-not-print"})
	changed := func(id catalog.SourceID) map[catalog.SourceID]string {
		return map[catalog.SourceID]string{id: w.sum(id, old)}
	}

	shared := src["shared"]
	failedAt := now.Add(-20 * time.Minute)
	w.add(deployment{ns: "shop", name: "app-00", reads: []catalog.SourceID{shared}, rolling: true, annotations: map[string]string{
		a.Rollout: rolloutRecord(failedAt, map[string]string{shared.String(): w.change(shared)}, "failed", "DeadlineExceeded")}})
	hold := `{"kind":"wave","source":"` + shared.String() + `","change":"` + w.change(shared) +
		`","cause":"deployments.apps/shop/app-00: DeadlineExceeded: not complete 10m0s after the restart","since":"2026-05-01T11:50:00Z"}`
	for i, name := range names("app", 10)[1:] {
		d := deployment{ns: "shop", name: name, reads: []catalog.SourceID{shared}, applied: changed(shared)}
		if i < 5 {
			d.annotations = map[string]string{a.Hold: hold}
		}
		w.add(d)
	}

	fleet := src["fleet"]
	w.add(deployment{ns: "shop", name: "f-00", reads: []catalog.SourceID{fleet}, rolling: true, annotations: map[string]string{
		a.Rollout: rolloutRecord(now.Add(-5*time.Minute), map[string]string{fleet.String(): w.change(fleet)}, "", "")}})
	for _, name := range names("f", 6)[1:] {
		w.add(deployment{ns: "shop", name: name, reads: []catalog.SourceID{fleet}, applied: changed(fleet)})
	}
	for _, name := range names("b", 4) {
		w.add(deployment{ns: "shop", name: name, reads: []catalog.SourceID{src["bulk"]}, applied: changed(src["bulk"])})
	}

	loop := src["loop"]
	var restarts []time.Time
	for i := 5; i >= 2; i-- {
		restarts = append(restarts, now.Add(-time.Duration(i)*time.Minute))
	}
	w.add(deployment{ns: "shop", name: "worker", reads: []catalog.SourceID{loop}, applied: changed(loop), annotations: map[string]string{
		a.Rollout: rolloutRecord(now.Add(-time.Minute), map[string]string{loop.String(): "0123456789abcdef"}, "complete", "", restarts...),
		a.Hold:    `{"kind":"breaker","cause":"restarted 5 times within 30m0s (budget 5)","since":"2026-05-01T11:59:00Z"}`}})
	w.add(deployment{ns: "shop", name: "batch", reads: []catalog.SourceID{src["flags"]}, applied: changed(src["flags"]),
		annotations: map[string]string{a.Window: "nights"}})
	w.add(deployment{ns: "shop", name: "api", reads: []catalog.SourceID{src["cache"]}, applied: changed(src["cache"]),
		annotations: map[string]string{a.MinInterval: "1h",
			a.Rollout: rolloutRecord(now.Add(-30*time.Minute), map[string]string{src["cache"].String(): "0123456789abcdef"}, "complete", "")}})
	w.add(deployment{ns: "shop", name: "web", reads: []catalog.SourceID{src["solo"]}, applied: changed(src["solo"])})
	w.forbidden["secret"] = true
	w.add(deployment{ns: "shop", name: "vault", reads: []catalog.SourceID{src["creds"]}})
	w.add(deployment{ns: "shop", name: "idle", reads: []catalog.SourceID{src["calm"]}})
	return w
}

func render(t *testing.T, r *Report, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, r, format); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The controller's leader and health as ReadController finds them.
func exampleController() *Controller {
	renewed, acquired := now.Add(-2*time.Second), now.Add(-3*time.Hour)
	ready, leader := true, true
	return &Controller{LeaderElection: true, Lease: "restart-controller/restart-controller", Holder: "restart-controller-7d9f8-x2kqp",
		RenewTime: &renewed, AcquireTime: &acquired, Metrics: &Metrics{
			From:  "pod restart-controller/restart-controller-7d9f8-x2kqp (the leader) through the API server's proxy",
			Ready: &ready, Leader: &leader, Held: map[string]float64{"wave": 5, "breaker": 1}, Waiting: map[string]float64{"window": 1, "min-interval": 1}}}
}

func TestGolden(t *testing.T) {
	w := incidentWorld(t)
	rep := w.report()
	rep.Controller = exampleController()
	for _, tt := range []struct{ name, format string }{
		{"incident.txt", explain.FormatTable},
		{"incident-wide.txt", FormatWide},
		{"incident.json", explain.FormatJSON},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := explaintest.Normalise(render(t, rep, tt.format))
			explaintest.Compare(t, filepath.Join("testdata", "golden", tt.name), got, *update)
		})
	}
}

// Every restart the incident world holds back is there, with its reason and
// its end.
func TestIncidentReasons(t *testing.T) {
	rep := incidentWorld(t).report()
	got := map[string]Restart{}
	for _, rs := range rep.Restarts {
		got[strings.TrimPrefix(rs.Workload, "deployments.apps/shop/")] = rs
	}
	want := map[string]string{"worker": ReasonBreaker, "batch": ReasonWindow, "api": ReasonMinInterval, "b-00": ReasonCap,
		"web": ReasonDue, "vault": ReasonUnknown}
	for _, name := range names("app", 10)[1:] {
		want[name] = ReasonWaveHalted
	}
	for _, name := range append(names("f", 6)[1:], names("b", 4)[1:]...) {
		want[name] = ReasonWave
	}
	for name, reason := range want {
		if got[name].Reason != reason {
			t.Errorf("%s: reason %q, want %q (%+v)", name, got[name].Reason, reason, got[name])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d restarts listed, want %d", len(got), len(want))
	}
	// The opening in the window's time zone, as its schedule says it.
	if u := got["batch"].Until; u == nil || u.Format(time.RFC3339) != "2026-05-01T22:00:00+02:00" || !strings.HasSuffix(got["batch"].Ends, "at 2026-05-01T22:00:00+02:00") {
		t.Errorf("batch waits until %v (%s), want its window's opening at 22:00 in Berlin", u, got["batch"].Ends)
	}
	if u := got["api"].Until; u == nil || !u.Equal(now.Add(30*time.Minute)) {
		t.Errorf("api waits until %v, want its interval's end at 12:30", u)
	}
	if rs := got["app-01"]; rs.Since == nil || rs.Release == "" {
		t.Errorf("app-01, held with a hold written: %+v", rs)
	}
	var shared *Change
	for i := range rep.Changes {
		if rep.Changes[i].Source == "configmap/shop/shared" {
			shared = &rep.Changes[i]
		}
	}
	if shared == nil || !shared.Halted || shared.Wave != 1 || shared.Waves != 4 || shared.Restarted != 1 || shared.Reach != 10 ||
		shared.Failed != 1 || shared.Held != 9 || shared.HeldSince == nil || !strings.Contains(shared.Release, "kubectl annotate configmap shared -n shop") {
		t.Errorf("the change of shared: %+v", shared)
	}
	if len(rep.NotRead) != 1 || !strings.Contains(rep.NotRead[0], "secrets: ") {
		t.Errorf("not read: %q, want the Secrets", rep.NotRead)
	}
}

// Status's verdict on every workload is explain's, which reads each one
// alone (its sources one GET each, its namespace's workloads listed),
// where status decides them all over one listing: the same action and
// gate, and the same end where the objects tell it; workloads status does
// not list have nothing to restart.
func TestStatusAgreesWithExplain(t *testing.T) {
	for name, w := range map[string]*world{"incident": incidentWorld(t), "released": releasedWorld(t)} {
		t.Run(name, func(t *testing.T) {
			agree(t, w, w.report())
		})
	}
}

// agree checks status's report against explain on every workload.
func agree(t *testing.T, w *world, rep *Report) {
	t.Helper()
	listed := map[string]Restart{}
	for _, rs := range rep.Restarts {
		listed[rs.Workload] = rs
	}
	for _, wl := range w.workloads {
		key := catalog.WorkloadKey{Resource: wl.Kind.GVR, Namespace: wl.Object.GetNamespace(), Name: wl.Object.GetName()}.String()
		d := w.explain(wl).Decision
		rs, ok := listed[key]
		switch {
		case !ok && (d.Action == explain.ActionNothing || d.Action == explain.ActionRecord):
		case !ok:
			t.Errorf("%s: explain says %s (%s), status does not list it", key, d.Action, strings.Join(d.Reasons, "; "))
		case rs.Action != d.Action || rs.Gate != d.Gate || !sameTime(rs.Until, d.Until):
			t.Errorf("%s: status says %s at %q until %v, explain %s at %q until %v", key, rs.Action, rs.Gate, rs.Until, d.Action, d.Gate, d.Until)
		}
		delete(listed, key)
	}
	for key := range listed {
		t.Errorf("status lists %s, which is not in the world", key)
	}
}

func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// releasedWorld is the incident's halted change once released: its held
// readers go on in waves, app-01 first.
func releasedWorld(t testing.TB) *world {
	w := incidentWorld(t)
	id := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "shared"}
	w.annotateSource(id, map[string]string{w.cfg.Annotations.Release: w.change(id)})
	return w
}

// Released, a halted change goes on: its first failure counts as settled,
// and the next readers are admitted (due) or wait for their wave.
func TestReleasedChangeGoesOn(t *testing.T) {
	rep := releasedWorld(t).report()
	for _, ch := range rep.Changes {
		if ch.Source != "configmap/shop/shared" {
			continue
		}
		if ch.Halted || !ch.Released || ch.Wave != 2 || ch.Restarted != 1 {
			t.Errorf("released change: %+v", ch)
		}
	}
	reasons := map[string]int{}
	for _, rs := range rep.Restarts {
		if strings.HasPrefix(rs.Workload, "deployments.apps/shop/app-") {
			reasons[rs.Reason]++
		}
	}
	// Wave 2 has room for two, under a cap of one rollout in flight
	// (f-00's): the first waits for the cap, the others for their wave.
	if reasons[ReasonWaveHalted] != 0 || reasons[ReasonCap]+reasons[ReasonDue] != 2 || reasons[ReasonWave] != 7 {
		t.Errorf("released readers by reason: %v", reasons)
	}
}

// Listing one namespace answers for it alone, and says that the cap counts
// the rollouts of every namespace.
func TestScopedToOneNamespace(t *testing.T) {
	w := incidentWorld(t)
	w.source("configmap", "other", "shared", map[string]string{"v": "1"})
	w.add(deployment{ns: "other", name: "elsewhere", reads: []catalog.SourceID{{Kind: "configmap", Namespace: "other", Name: "shared"}},
		applied: map[catalog.SourceID]string{{Kind: "configmap", Namespace: "other", Name: "shared"}: "x"}})
	rep := Build(w.listing("shop"), "namespace shop", now)
	for _, rs := range rep.Restarts {
		if strings.Contains(rs.Workload, "/other/") {
			t.Errorf("listed %s of another namespace", rs.Workload)
		}
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "the cap on paced rollouts in flight (1)") }) {
		t.Errorf("notes %q do not say the cap was counted in part", rep.Notes)
	}
	agree(t, &world{t: t, cfg: w.cfg, sources: w.sources, forbidden: w.forbidden, workloads: slices.DeleteFunc(w.workloads,
		func(wl explain.Workload) bool { return wl.Object.GetNamespace() != "shop" })}, rep)
}

// No output of any format ever holds a Secret value, raw or encoded.
func TestNeverPrintsSecretValues(t *testing.T) {
	w := incidentWorld(t)
	delete(w.forbidden, "secret")
	rep := w.report()
	rep.Controller = exampleController()
	value := "hunter2-do-not-print"
	for _, format := range []string{explain.FormatTable, FormatWide, explain.FormatJSON, explain.FormatYAML} {
		out := render(t, rep, format)
		for _, v := range []string{value, base64.StdEncoding.EncodeToString([]byte(value))} {
			if strings.Contains(out, v) {
				t.Errorf("%q output holds the Secret value %q", format, v)
			}
		}
	}
}

// The metrics the controller serves are read into its health: ready,
// leading, degraded kinds, held and waiting restarts by reason.
func TestParseMetrics(t *testing.T) {
	text := `# HELP restart_controller_ready x
# TYPE restart_controller_ready gauge
restart_controller_ready 1
# TYPE restart_controller_leader gauge
restart_controller_leader 0
# TYPE restart_controller_kind_degraded gauge
restart_controller_kind_degraded{namespace="",reason="forbidden",resource="secrets"} 1
# TYPE restart_controller_restarts_held gauge
restart_controller_restarts_held{reason="breaker"} 0
restart_controller_restarts_held{reason="wave"} 59
# TYPE restart_controller_restarts_waiting gauge
restart_controller_restarts_waiting{reason="window"} 1
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if m.Ready == nil || !*m.Ready || m.Leader == nil || *m.Leader || m.Held["wave"] != 59 || m.Waiting["window"] != 1 ||
		!slices.Equal(m.Degraded, []string{"secrets: forbidden"}) {
		t.Errorf("parsed %+v", m)
	}
	if _, err := ParseMetrics(strings.NewReader("up 1\n")); err == nil {
		t.Error("another program's metrics were taken for the controller's")
	}
}

// The README's example of status is the incident's table, word for word
// (its golden file with the checksums as they are).
func TestREADMEExample(t *testing.T) {
	const path = "../../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := incidentWorld(t).report()
	rep.Controller = exampleController()
	re := regexp.MustCompile("(?s)(<!-- BEGIN generated:status[^>]*-->\n).*?(<!-- END generated:status -->)")
	if !re.Match(raw) {
		t.Fatal("README.md has no generated block \"status\"")
	}
	body := "```console\n$ kubectl restart-controller status -A\n" + render(t, rep, explain.FormatTable) + "```\n"
	got := re.ReplaceAllString(string(raw), "${1}"+strings.ReplaceAll(body, "$", "$$")+"${2}")
	if got == string(raw) {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Error("README.md's status example is not what status prints for the incident: run go test ./internal/status -run TestREADMEExample -update")
}
