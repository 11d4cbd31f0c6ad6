package strategy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
)

const (
	optInKey        = "com.xing.deployment-restart"
	appliedKey      = "com.xing.deployment-restart.applied-config-checksums"
	timestampKey    = "com.xing.deployment-restart.timestamp"
	templateHashKey = "com.xing.deployment-restart.applied-template-hash"
)

var cmApp = catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}

var testAnnotations = config.Annotations{
	OptIn: optInKey, AppliedChecksums: appliedKey, RestartTimestamp: timestampKey, AppliedTemplateHash: templateHashKey,
}

func TestBuildPatch(t *testing.T) {
	// A local time with nanoseconds: the timestamp must be UTC, to the nanosecond.
	now := time.Date(2030, 1, 2, 4, 4, 5, 6, time.FixedZone("CET", 3600))
	w := &catalog.WorkloadState{TemplateHash: "abcdefabcdefabcd"}
	w.ResourceVersion = "42"
	two := map[string]string{"secret/shop/db": "2222222222222222", "configmap/shop/app": "1111111111111111"}

	const recordOnly = `{"metadata":{"annotations":{` +
		`"com.xing.deployment-restart.applied-config-checksums":"{\"configmap/shop/app\":\"1111111111111111\",\"secret/shop/db\":\"2222222222222222\"}",` +
		`"com.xing.deployment-restart.applied-template-hash":"abcdefabcdefabcd"},` +
		`"resourceVersion":"42"}}`
	const metadata = `"metadata":{"annotations":{` +
		`"com.xing.deployment-restart.applied-config-checksums":"{\"configmap/shop/app\":\"1111111111111111\",\"secret/shop/db\":\"2222222222222222\"}",` +
		`"com.xing.deployment-restart.applied-template-hash":"abcdefabcdefabcd"},` +
		`"resourceVersion":"42"}`
	const stamp = `"metadata":{"annotations":{"com.xing.deployment-restart.timestamp":"2030-01-02T03:04:05.000000006Z"}}`

	cases := []struct {
		name   string
		fields []string
		plan   decision.Plan
		want   string
	}{
		{"record only, Deployment", []string{"spec", "template"}, decision.Plan{Applied: two, Patch: true}, recordOnly},
		{"record only, CronJob", []string{"spec", "jobTemplate", "spec", "template"}, decision.Plan{Applied: two, Patch: true}, recordOnly},
		{"nothing referenced", []string{"spec", "template"}, decision.Plan{Applied: map[string]string{}, Patch: true},
			`{"metadata":{"annotations":{"com.xing.deployment-restart.applied-config-checksums":"{}",` +
				`"com.xing.deployment-restart.applied-template-hash":"abcdefabcdefabcd"},"resourceVersion":"42"}}`},
		{"restart, Deployment", []string{"spec", "template"},
			decision.Plan{Applied: two, Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
			`{` + metadata + `,"spec":{"template":{` + stamp + `}}}`},
		{"restart, CronJob", []string{"spec", "jobTemplate", "spec", "template"},
			decision.Plan{Applied: two, Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
			`{` + metadata + `,"spec":{"jobTemplate":{"spec":{"template":{` + stamp + `}}}}}`},
		{"restart, absent source recorded", []string{"spec", "template"},
			decision.Plan{Applied: map[string]string{"configmap/shop/app": ""}, Patch: true, Restart: true},
			`{"metadata":{"annotations":{"com.xing.deployment-restart.applied-config-checksums":"{\"configmap/shop/app\":\"\"}",` +
				`"com.xing.deployment-restart.applied-template-hash":"abcdefabcdefabcd"},"resourceVersion":"42"},` +
				`"spec":{"template":{` + stamp + `}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := BuildPatch(tc.fields, testAnnotations, w, tc.plan, now)
			if err != nil {
				t.Fatal(err)
			}
			if string(body) != tc.want {
				t.Errorf("patch:\n got %s\nwant %s", body, tc.want)
			}
			// Same inputs, same bytes (map iteration order must not leak).
			for i := 0; i < 20; i++ {
				again, _ := BuildPatch(tc.fields, testAnnotations, w, tc.plan, now)
				if string(again) != string(body) {
					t.Fatalf("unstable output:\n%s\n%s", body, again)
				}
			}
		})
	}
}

func TestBuildPatchTimestampPrecision(t *testing.T) {
	w := &catalog.WorkloadState{TemplateHash: "h"}
	plan := decision.Plan{Applied: map[string]string{}, Patch: true, Restart: true}
	stampOf := func(now time.Time) string {
		body, err := BuildPatch([]string{"spec", "template"}, testAnnotations, w, plan, now)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Spec struct {
				Template struct {
					Metadata struct {
						Annotations map[string]string `json:"annotations"`
					} `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		return p.Spec.Template.Metadata.Annotations[timestampKey]
	}
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := stampOf(t0), stampOf(t0.Add(time.Millisecond))
	if a == b {
		t.Errorf("two restarts within one second write the same timestamp %q", a)
	}
	if a != "2030-01-02T03:04:05Z" {
		t.Errorf("timestamp %q", a)
	}
	if parsed, err := time.Parse(time.RFC3339Nano, b); err != nil || !parsed.Equal(t0.Add(time.Millisecond)) {
		t.Errorf("timestamp %q does not round-trip: %v", b, err)
	}
}
