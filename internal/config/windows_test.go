package config

import (
	"strings"
	"testing"
	"time"
)

// A window is open from each opening of its schedule, in its time zone,
// for its duration; openings that overlap make one longer opening.
func TestWindowAt(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte(`
restartWindows:
- {name: nights, schedule: "0 2 * * *", duration: 3h, timeZone: Europe/Berlin}
- {name: mornings, schedule: "0,20 10 * * *", duration: 30m}
`))
	if err != nil {
		t.Fatal(err)
	}
	nights, mornings := cfg.Windows[0], cfg.Windows[1]
	at := func(s string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, tc := range []struct {
		name          string
		w             Window
		now           time.Time
		open          bool
		opens, closes time.Time
	}{
		{"before the night", nights, at("2026-11-28 01:59"), false, at("2026-11-28 02:00"), time.Time{}},
		{"at its opening", nights, at("2026-11-28 02:00"), true, time.Time{}, at("2026-11-28 05:00")},
		{"inside", nights, at("2026-11-28 04:59"), true, time.Time{}, at("2026-11-28 05:00")},
		{"at its end: closed", nights, at("2026-11-28 05:00"), false, at("2026-11-29 02:00"), time.Time{}},
		{"by day", nights, at("2026-11-28 13:00"), false, at("2026-11-29 02:00"), time.Time{}},
		// 2026-03-29: Berlin moves to summer time at 02:00, so 02:00 does
		// not exist that night, and robfig/cron, like Kubernetes'
		// CronJobs, skips it: the next opening is the night after.
		{"the night clocks go forward", nights, at("2026-03-29 01:30"), false, at("2026-03-30 02:00"), time.Time{}},
		{"overlapping openings make one", mornings, time.Date(2026, 11, 28, 10, 25, 0, 0, time.UTC), true, time.Time{},
			time.Date(2026, 11, 28, 10, 50, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, opens, closes := tc.w.At(tc.now)
			if open != tc.open || !opens.Equal(tc.opens) || !closes.Equal(tc.closes) {
				t.Fatalf("At(%v) = %v, opens %v, closes %v; want %v, %v, %v", tc.now, open, opens, closes, tc.open, tc.opens, tc.closes)
			}
		})
	}
}

// Every problem of the restart windows is reported under its path.
func TestWindowErrors(t *testing.T) {
	_, err := Parse([]byte(`
restartWindows:
- {name: nights, schedule: "0 2 * * *", duration: 3h, timeZone: Europe/Berlni}
- {name: nights, schedule: "0 25 * * *", duration: 30s}
- {name: none, schedule: "CRON_TZ=UTC 0 2 * * *", duration: 1h, namespaceSelector: "a in (b"}
- {schedule: "", duration: 1h}
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template, minInterval: 10ms}
annotations: {window: com.xing.deployment-restart.hold}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`restartWindows[0].timeZone: unknown time zone "Europe/Berlni"`,
		`restartWindows[1].name: "nights" names another window already`,
		`restartWindows[1].schedule: "0 25 * * *" is not a cron schedule`,
		`restartWindows[1].duration: must be between 1m0s and 168h0m0s, got 30s`,
		`restartWindows[2].name: "none" means no window, and cannot name one`,
		`restartWindows[2].schedule: "CRON_TZ=UTC 0 2 * * *": give the time zone in timeZone, not in the schedule`,
		`restartWindows[2].namespaceSelector:`,
		`restartWindows[3].name: required`,
		`restartWindows[3].schedule: required`,
		`workloads[0].minInterval: must be between 1s and 168h0m0s, got 10ms`,
		`annotations.window: must differ from annotations.hold`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
