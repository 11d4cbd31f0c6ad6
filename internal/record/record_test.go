package record

import (
	"strings"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/rollout"
)

func TestRecordHistory(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	prev := &LastRestart{At: now.Add(-time.Minute), Restarts: []time.Time{now.Add(-2 * time.Hour), now.Add(-time.Minute)}}
	r := NewLastRestart(prev, map[string]string{"configmap/ns/a": "c1"}, now, time.Hour)
	if len(r.Restarts) != 2 || !r.Restarts[1].Equal(now) || !r.InFlight() || !r.Delivered("configmap/ns/a", "c1") || r.Delivered("configmap/ns/a", "c2") {
		t.Fatalf("%+v", r)
	}
	var long *LastRestart
	for i := 0; i < 3*maxHistory; i++ {
		long = NewLastRestart(long, nil, now.Add(time.Duration(i)*time.Millisecond), time.Hour)
	}
	if len(long.Restarts) != maxHistory {
		t.Fatalf("history of %d", len(long.Restarts))
	}
	done := r.WithResult(rollout.Verdict{Result: rollout.ResultComplete}, now.Add(time.Second))
	if done.InFlight() || !r.InFlight() {
		t.Fatal("WithResult must copy")
	}
	back, err := ParseLastRestart(Encode(done))
	if err != nil || back.Result != rollout.ResultComplete || !back.At.Equal(now) || back.Sources["configmap/ns/a"] != "c1" {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

func TestParseHostile(t *testing.T) {
	for _, raw := range []string{"x", "[]", `{"at":"2026-01-01T00:00:00Z","result":"maybe"}`, `{"sources":{}}`} {
		if _, err := ParseLastRestart(raw); err == nil {
			t.Errorf("record %q accepted", raw)
		}
	}
	for _, raw := range []string{"x", `{"kind":"other"}`, `{"kind":"wave"}`} {
		if _, err := ParseHold(raw); err == nil {
			t.Errorf("hold %q accepted", raw)
		}
	}
	if r, err := ParseLastRestart(""); r != nil || err != nil {
		t.Fatal("absent record")
	}
	h := &Hold{Kind: HoldWave, Source: "configmap/ns/a", Change: "c1", Cause: "x", Since: time.Unix(0, 0).UTC()}
	back, err := ParseHold(Encode(h))
	if err != nil || !back.HoldsChange("configmap/ns/a", "c1") || back.HoldsChange("configmap/ns/a", "c2") {
		t.Fatalf("%+v %v", back, err)
	}
	if Encode((*Hold)(nil)) != "" || !strings.Contains(Encode(h), `"kind":"wave"`) {
		t.Fatal("encode")
	}
}

// FuzzTemplate feeds arbitrary applied-template-hash annotations to their
// parser: never a panic, and what is read back writes the same.
func FuzzTemplate(f *testing.F) {
	const hash, uid = "1111111111111111", "5d6f0000-0000-4000-8000-00000000000a"
	for _, seed := range []string{"", hash, hash + "@100@" + uid, "@@", "a@b", "a@1@", "a@01@u", "a@1@u@v", "a@-1@u", "a@99999999999999999999999@u"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, annotation string) {
		r := ParseTemplate(annotation)
		if again := ParseTemplate(r.String()); again != r {
			t.Fatalf("%q read as %+v, written as %q, read back as %+v", annotation, r, r.String(), again)
		}
	})
}
