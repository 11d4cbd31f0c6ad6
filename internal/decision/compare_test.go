package decision

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
)

var (
	decideNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

	cmApp  = catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
	secDB  = catalog.SourceID{Kind: "secret", Namespace: "shop", Name: "db"}
	cmGone = catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "retired"}
)

// bothRestart is the default source lifecycle.
var bothRestart = config.SourceLifecycle{RestartOnCreate: true, RestartOnDelete: true}

// unselected is the lifecycle under a sourceSelector: an absent source is
// unknown, whatever the restart settings say.
var unselected = config.SourceLifecycle{RestartOnCreate: true, RestartOnDelete: true, AbsentUnknown: true}

const (
	tmplNow = "1111111111111111" // current template hash
	tmplOld = "0000000000000000" // a template hash from before a template change
	webUID  = "5d6f0000-0000-4000-8000-00000000000a"
)

func TestDecide(t *testing.T) {
	appV1 := sourceState(t, cmApp, map[string]string{"a": "1", "b": "1"})
	appV2 := sourceState(t, cmApp, map[string]string{"a": "2", "b": "1"}) // read key a changed
	appB2 := sourceState(t, cmApp, map[string]string{"a": "1", "b": "2"}) // only key b changed
	dbV1 := sourceState(t, secDB, map[string]string{"pw": "x"})
	dbV2 := sourceState(t, secDB, map[string]string{"pw": "y"})

	whole := catalog.Reference{ID: cmApp}
	matched := catalog.Reference{ID: cmApp, Optional: true, Matched: true}
	appPattern := config.ListPattern{Kind: "configmap", Entry: "ap+", Re: regexp.MustCompile("^(?:ap+)$"), Annotation: "example.com/reload"}
	appKey := "configmap/shop/~ap+"
	wholeOptional := catalog.Reference{ID: cmApp, Optional: true}
	keyA := catalog.Reference{ID: cmApp, Keys: []string{"a"}}
	dbPW := catalog.Reference{ID: secDB, Keys: []string{"pw"}}

	// appV1 with key a in binaryData, its text unchanged: another file.
	appMoved := sourceStateIn(t, cmApp, map[string]string{"b": "1"}, map[string]string{"a": "1"})
	app1, app2 := appV1.Checksum(testSums, nil), appV2.Checksum(testSums, nil)
	db1, db2 := dbV1.Checksum(testSums, dbPW.Keys), dbV2.Checksum(testSums, dbPW.Keys)
	keyA1 := appV1.Checksum(testSums, keyA.Keys)
	if app1 == app2 || db1 == db2 || keyA1 != appB2.Checksum(testSums, keyA.Keys) || app1 == appMoved.Checksum(testSums, nil) {
		t.Fatal("fixture checksums are not what the table assumes")
	}

	type row struct {
		name         string
		refs         []catalog.Reference
		applied      *string // nil: no annotation
		appliedHash  string  // the applied-template-hash annotation
		templateHash string  // tmplNow when empty
		templateRV   string  // the write that set the template, when known
		notRolled    string
		ordered      bool // resourceVersions are compared
		sources      sourceMap
		windows      dueAt
		createdOnly  bool                    // the windows were opened by creations, not updates
		life         *config.SourceLifecycle // both restart when nil
		patterns     []config.ListPattern    // regex source list entries

		want        Plan // Warning compared as "present or not"; TemplateRecord the template hash when empty
		wantWarning bool
	}
	ann := func(m map[string]string) *string { s := annotation(t, m); return &s }
	raw := func(s string) *string { return &s }

	rows := []row{
		{
			name:    "new workload never restarted: current checksums recorded",
			refs:    []catalog.Reference{whole, dbPW},
			sources: sourceMap{cmApp: appV2, secDB: dbV2},
			want:    Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db2}, Patch: true},
		},
		{
			name:        "nothing changed: no patch",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1, secDB: dbV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}},
		},
		{
			name:        "known checksum changed: restart",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2, secDB: dbV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db1},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "change inside its grace period: wait until it is due",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2, secDB: dbV1},
			windows:     dueAt{cmApp: decideNow.Add(3*time.Second + 250*time.Millisecond)},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1},
				Wait: 3*time.Second + 250*time.Millisecond},
		},
		{
			name:        "grace period ends exactly now: restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			windows:     dueAt{cmApp: decideNow},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "two sources changed, one due, one waiting: one restart writing both",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2, secDB: dbV2},
			windows:     dueAt{secDB: decideNow.Add(4 * time.Second)},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db2},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "two sources changed, both waiting: wait for the earlier",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2, secDB: dbV2},
			windows:     dueAt{cmApp: decideNow.Add(7 * time.Second), secDB: decideNow.Add(2 * time.Second)},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1},
				Wait: 2 * time.Second},
		},
		{
			name:        "two sources changed, both due: one restart, changed sorted",
			refs:        []catalog.Reference{dbPW, whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2, secDB: dbV2},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db2},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp, secDB}},
		},
		{
			name:        "key the pods do not read changed: nothing",
			refs:        []catalog.Reference{keyA},
			applied:     ann(map[string]string{"configmap/shop/app": keyA1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appB2},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": keyA1}},
		},
		{
			name:        "key the pods read changed: restart",
			refs:        []catalog.Reference{keyA},
			applied:     ann(map[string]string{"configmap/shop/app": keyA1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			want: Plan{Applied: map[string]string{"configmap/shop/app": appV2.Checksum(testSums, keyA.Keys)},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "optional source appears: restart",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{"configmap/shop/app": ""}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app1},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "optional source appears inside its grace period: wait",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{"configmap/shop/app": ""}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": ""}, Wait: time.Second},
		},
		{
			name:        "required source appears: record only",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": ""}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			name:        "required source deleted: nothing restarts, entry kept, reported",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{secDB: dbV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1},
				RequiredGone: []catalog.SourceID{cmApp}},
		},
		{
			name:        "required source deleted, restartOnDelete off: the same",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{},
			life:        &config.SourceLifecycle{RestartOnCreate: true},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, RequiredGone: []catalog.SourceID{cmApp}},
		},
		{
			name:        "optional source deleted: restart, recorded absent (confirmed first)",
			refs:        []catalog.Reference{wholeOptional, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{secDB: dbV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": "", "secret/shop/db": db1}, Patch: true, Restart: true,
				Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "optional source deleted inside its grace period: wait",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Wait: time.Second},
		},
		{
			name:        "optional source deleted, restartOnDelete off: nothing, entry kept",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{},
			life:        &config.SourceLifecycle{RestartOnCreate: true},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}},
		},
		{
			name:        "source a pattern matched deleted: restart, its entry leaves the record",
			refs:        []catalog.Reference{{ID: cmApp, Optional: true, Matched: true}},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{},
			want:        Plan{Applied: map[string]string{}, Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "source a pattern matched deleted, restartOnDelete off: its entry leaves the record",
			refs:        []catalog.Reference{{ID: cmApp, Optional: true, Matched: true}},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{},
			life:        &config.SourceLifecycle{RestartOnCreate: true},
			want:        Plan{Applied: map[string]string{}, Patch: true},
		},
		{
			name:        "source a recorded pattern matches appears: restart",
			refs:        []catalog.Reference{matched},
			patterns:    []config.ListPattern{appPattern},
			applied:     ann(map[string]string{appKey: PatternMark}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app1, appKey: PatternMark},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "source a recorded pattern matches appears, restartOnCreate off: record only",
			refs:        []catalog.Reference{matched},
			patterns:    []config.ListPattern{appPattern},
			applied:     ann(map[string]string{appKey: PatternMark}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			life:        &config.SourceLifecycle{RestartOnDelete: true},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1, appKey: PatternMark}, Patch: true},
		},
		{
			name:        "source a new pattern matches (an edited list): record only, the pattern with it",
			refs:        []catalog.Reference{matched},
			patterns:    []config.ListPattern{appPattern},
			applied:     ann(map[string]string{}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1, appKey: PatternMark}, Patch: true},
		},
		{
			name:        "pattern and its match recorded, nothing changed: nothing",
			refs:        []catalog.Reference{matched},
			patterns:    []config.ListPattern{appPattern},
			applied:     ann(map[string]string{"configmap/shop/app": app1, appKey: PatternMark}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1, appKey: PatternMark}},
		},
		{
			name:        "optional source appears, restartOnCreate off: record only",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{"configmap/shop/app": ""}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			life:        &config.SourceLifecycle{RestartOnDelete: true},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			name:         "template changed while an optional source is deleted: recorded as absent",
			refs:         []catalog.Reference{wholeOptional},
			applied:      ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash:  tmplOld,
			templateHash: tmplNow,
			sources:      sourceMap{},
			want:         Plan{Applied: map[string]string{"configmap/shop/app": ""}, Patch: true},
		},
		{
			name:    "sourceSelector, source not cached, first sight: nothing recorded for it",
			refs:    []catalog.Reference{whole, dbPW},
			sources: sourceMap{secDB: dbV1},
			life:    &unselected,
			want:    Plan{Applied: map[string]string{"secret/shop/db": db1}, Patch: true},
		},
		{
			name:        "sourceSelector, recorded source no longer cached (deleted or unlabelled): its record kept, no restart",
			refs:        []catalog.Reference{wholeOptional, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash: tmplNow,
			sources:     sourceMap{secDB: dbV1},
			life:        &unselected,
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}},
		},
		{
			name:         "sourceSelector, template changed while a recorded source is not cached: its record kept",
			refs:         []catalog.Reference{wholeOptional},
			applied:      ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash:  tmplOld,
			templateHash: tmplNow,
			sources:      sourceMap{},
			life:         &unselected,
			want:         Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			name:        "sourceSelector, source enters the cache unrecorded (labelled, or created): recorded, no restart",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			life:        &unselected,
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			name:        "sourceSelector, source back in the cache with other data than recorded: restart",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			life:        &unselected,
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "referenced source never existed: recorded as absent",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{}),
			appliedHash: tmplNow,
			sources:     sourceMap{},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": ""}, Patch: true},
		},
		{
			name:        "referenced source still absent: nothing",
			refs:        []catalog.Reference{wholeOptional},
			applied:     ann(map[string]string{"configmap/shop/app": ""}),
			appliedHash: tmplNow,
			sources:     sourceMap{},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": ""}},
		},
		{
			name:        "deleted then re-created with the same data: nothing",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: sourceState(t, cmApp, map[string]string{"b": "1", "a": "1"})},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}},
		},
		{
			name:        "deleted then re-created with different data: restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:         "template changed: record only (the template change rolls the pods)",
			refs:         []catalog.Reference{whole, dbPW},
			applied:      ann(map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}),
			appliedHash:  tmplOld,
			templateHash: tmplNow,
			sources:      sourceMap{cmApp: appV2, secDB: dbV1},
			want:         Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db1}, Patch: true},
		},
		{
			name:        "template changed, data unchanged: new template hash recorded",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			// xing's second situation: pods of the new template that
			// started before the change read old data.
			name:        "template changed while its source is changing: Pending, restart when due",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			sources:     sourceMap{cmApp: appV2},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": record.Pending}, Patch: true, Wait: time.Second},
		},
		{
			name:        "pending entry, change due: restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": record.Pending}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "new workload whose source was just created: recorded, no restart",
			refs:        []catalog.Reference{whole},
			sources:     sourceMap{cmApp: appV1},
			windows:     dueAt{cmApp: decideNow.Add(2 * time.Second)},
			createdOnly: true,
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			name:    "new workload whose source is changing: Pending, restart when due",
			refs:    []catalog.Reference{whole, dbPW},
			sources: sourceMap{cmApp: appV2, secDB: dbV1},
			windows: dueAt{cmApp: decideNow.Add(2 * time.Second)},
			want:    Plan{Applied: map[string]string{"configmap/shop/app": record.Pending, "secret/shop/db": db1}, Patch: true, Wait: 2 * time.Second},
		},
		{
			name:        "newly referenced source without entry: recorded",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1, secDB: dbV2},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db2}, Patch: true},
		},
		{
			name:        "unparsable annotation: warning, current recorded",
			refs:        []catalog.Reference{whole},
			applied:     raw(`{"configmap/shop/app": "` + app1),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app2}, Patch: true},
			wantWarning: true,
		},
		{
			name:        "annotation with a non-string value: warning, current recorded",
			refs:        []catalog.Reference{whole},
			applied:     raw(`{"configmap/shop/app": 7}`),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app2}, Patch: true},
			wantWarning: true,
		},
		{
			name:        "annotation that is a JSON list: warning, current recorded",
			refs:        []catalog.Reference{whole},
			applied:     raw(`["configmap/shop/app"]`),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
			wantWarning: true,
		},
		{
			name:        "empty annotation: warning, current recorded",
			refs:        []catalog.Reference{whole},
			applied:     raw(""),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
			wantWarning: true,
		},
		{
			name:        "unparsable annotation, nothing referenced: warning, {} recorded",
			applied:     raw(`{"configmap/shop/app":`),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{}, Patch: true},
			wantWarning: true,
		},
		{
			name:        "annotation listing a source no longer referenced: dropped, patch without restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1, cmGone.String(): "abcdefabcdefabcd"}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1, cmGone: appV2},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			name:    "xing-format annotation without template hash: record only",
			refs:    []catalog.Reference{whole, dbPW},
			applied: ann(map[string]string{"configmap/shop/app": "0123456789abcdef", "secret/shop/db": "fedcba9876543210"}),
			sources: sourceMap{cmApp: appV2, secDB: dbV2},
			want:    Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db2}, Patch: true},
		},
		{
			name:    "annotation without template hash, optional source appeared: record only",
			refs:    []catalog.Reference{wholeOptional},
			applied: ann(map[string]string{"configmap/shop/app": ""}),
			sources: sourceMap{cmApp: appV1},
			want:    Plan{Applied: map[string]string{"configmap/shop/app": app1}, Patch: true},
		},
		{
			name:    "not referencing anything, first time: {} recorded",
			sources: sourceMap{cmApp: appV1},
			want:    Plan{Applied: map[string]string{}, Patch: true},
		},
		{
			name:        "not referencing anything, {} recorded: no patch",
			applied:     raw(`{}`),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want:        Plan{Applied: map[string]string{}},
		},

		// Issue 8: the order of writes in the API server (resourceVersions).
		{
			// helm upgrade: the ConfigMap, then the Deployment's template.
			name:        "ordered: template set after the source update: recorded, no restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			templateRV:  "100",
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "99")},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app2}, TemplateRecord: tmplNow + "@100@" + webUID, Patch: true},
		},
		{
			name:       "ordered: workload created after the source update: recorded, no restart",
			refs:       []catalog.Reference{whole, dbPW},
			templateRV: "100",
			ordered:    true,
			sources:    sourceMap{cmApp: at(appV2, "99"), secDB: at(dbV1, "3")},
			windows:    dueAt{cmApp: decideNow.Add(2 * time.Second)},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db1},
				TemplateRecord: tmplNow + "@100@" + webUID, Patch: true},
		},
		{
			name:        "ordered: source updated after the template was set: Pending, restart when due",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			templateRV:  "100",
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "101")},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want: Plan{Applied: map[string]string{"configmap/shop/app": record.Pending}, TemplateRecord: tmplNow + "@100@" + webUID,
				Patch: true, Wait: time.Second},
		},
		{
			// The cache holds the update, its event has not opened a window yet.
			name:        "ordered: source written after the template was set, no window: restart at once",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			templateRV:  "100",
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "101")},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2}, TemplateRecord: tmplNow + "@100@" + webUID,
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "ordered: required source created after the workload: recorded, the pods waited for it",
			refs:        []catalog.Reference{whole},
			templateRV:  "100",
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV1, "101")},
			windows:     dueAt{cmApp: decideNow.Add(2 * time.Second)},
			createdOnly: true,
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, TemplateRecord: tmplNow + "@100@" + webUID, Patch: true},
		},
		{
			name:        "ordered: optional source created after the workload: Pending, pods may have started without it",
			refs:        []catalog.Reference{wholeOptional},
			templateRV:  "100",
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV1, "101")},
			windows:     dueAt{cmApp: decideNow.Add(2 * time.Second)},
			createdOnly: true,
			want: Plan{Applied: map[string]string{"configmap/shop/app": record.Pending}, TemplateRecord: tmplNow + "@100@" + webUID,
				Patch: true, Wait: 2 * time.Second},
		},
		{
			name:        "ordered, template's resourceVersion unknown (start-up list): pending as without order",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "99")},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": record.Pending}, Patch: true, Wait: time.Second},
		},
		{
			name:        "ordering off: the template's resourceVersion is not used: pending",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			templateRV:  "100",
			sources:     sourceMap{cmApp: at(appV2, "99")},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": record.Pending}, Patch: true, Wait: time.Second},
		},
		{
			// The workload's event was decided before the source informer
			// delivered the update written before the template change.
			name:        "ordered: update arriving after the record, written before the template: re-recorded, no restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow + "@100@" + webUID,
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "99")},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app2}, TemplateRecord: tmplNow + "@100@" + webUID, Patch: true},
		},
		{
			name:        "ordered: update written after the recorded template: restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow + "@100@" + webUID,
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "101")},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2}, TemplateRecord: tmplNow + "@100@" + webUID,
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "ordered: template record of another object (a restored backup): order not used, restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow + "@100@another-uid",
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "99")},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2}, TemplateRecord: tmplNow + "@100@another-uid",
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "ordering off: recorded order kept but not used: restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow + "@100@" + webUID,
			sources:     sourceMap{cmApp: at(appV2, "99")},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2}, TemplateRecord: tmplNow + "@100@" + webUID,
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "ordered: unparsable resourceVersions: order unknown, restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow + "@100@" + webUID,
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "099")},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2}, TemplateRecord: tmplNow + "@100@" + webUID,
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "unreadable template record: record only",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow + "@x@" + webUID,
			ordered:     true,
			sources:     sourceMap{cmApp: at(appV2, "99")},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app2}, Patch: true},
		},

		// Versioned checksums.
		{
			name:        "upgrade: version-1 checksums of unchanged data re-recorded in version 3, no restart",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": v1(appV1, nil), "secret/shop/db": v1(dbV1, dbPW.Keys)}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1, secDB: dbV1},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1}, Patch: true},
		},
		{
			name:        "upgrade: version-1 checksum of changed data: restart",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": v1(appV1, nil), "secret/shop/db": v1(dbV1, dbPW.Keys)}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2, secDB: dbV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2, "secret/shop/db": db1},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "a format this build does not know (no release wrote v2:; a later release's v4:): a change, restart",
			refs:        []catalog.Reference{whole, dbPW},
			applied:     ann(map[string]string{"configmap/shop/app": "v2:" + v1(appV1, nil), "secret/shop/db": "v4:" + v1(dbV1, dbPW.Keys)}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1, secDB: dbV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app1, "secret/shop/db": db1},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp, secDB}},
		},
		{
			name:        "keyed with another key (key replaced): re-baselined, no restart even though data changed",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": appV1.Checksum(otherKey, nil)}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV2},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app2}, Patch: true},
		},
		{
			name:        "checksum of a version this build does not know: a change, restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": "v9:0123456789abcdef"}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appV1},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app1},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},
		{
			name:        "key moved from data to binaryData with the same text: restart",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			sources:     sourceMap{cmApp: appMoved},
			want: Plan{Applied: map[string]string{"configmap/shop/app": appMoved.Checksum(testSums, nil)},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}},
		},

		// Workloads whose template change replaces no pods.
		{
			name:        "paused: restart planned, reported as not rolled",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			notRolled:   "spec.paused is true",
			sources:     sourceMap{cmApp: appV2},
			want: Plan{Applied: map[string]string{"configmap/shop/app": app2},
				Patch: true, Restart: true, Changed: []catalog.SourceID{cmApp}, NotRolled: "spec.paused is true"},
		},
		{
			name:        "paused, change inside its grace period: wait, nothing reported yet",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplNow,
			notRolled:   "spec.paused is true",
			sources:     sourceMap{cmApp: appV2},
			windows:     dueAt{cmApp: decideNow.Add(time.Second)},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app1}, Wait: time.Second},
		},
		{
			name:        "OnDelete, template changed: recorded, nothing reported",
			refs:        []catalog.Reference{whole},
			applied:     ann(map[string]string{"configmap/shop/app": app1}),
			appliedHash: tmplOld,
			notRolled:   "spec.updateStrategy.type is OnDelete",
			sources:     sourceMap{cmApp: appV2},
			want:        Plan{Applied: map[string]string{"configmap/shop/app": app2}, Patch: true},
		},
	}

	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			w := &catalog.WorkloadState{References: r.refs, AppliedTemplateHash: r.appliedHash, TemplateHash: r.templateHash,
				TemplateRV: r.templateRV, NotRolled: r.notRolled, Patterns: r.patterns}
			w.Namespace, w.Name, w.UID = "shop", "web", webUID
			if w.TemplateHash == "" {
				w.TemplateHash = tmplNow
			}
			if r.want.TemplateRecord == "" {
				r.want.TemplateRecord = w.TemplateHash
			}
			if r.applied != nil {
				w.HasApplied, w.Applied = true, *r.applied
			}
			windows := graceAt(r.windows, !r.createdOnly)
			life := config.SourceLifecycle{RestartOnCreate: true, RestartOnDelete: true}
			if r.life != nil {
				life = *r.life
			}
			before := w.DeepCopyObject()
			plan := compare(w, r.sources, windows, decideNow, r.ordered, life)

			if (plan.Warning != "") != r.wantWarning {
				t.Errorf("warning %q, want warning: %v", plan.Warning, r.wantWarning)
			}
			plan.Warning = ""
			if !reflect.DeepEqual(plan, r.want) {
				t.Errorf("plan:\n got %+v\nwant %+v", plan, r.want)
			}
			if !reflect.DeepEqual(before, w.DeepCopyObject()) {
				t.Error("Decide changed the workload state")
			}
			// Same inputs, same plan.
			again := compare(w, r.sources, windows, decideNow, r.ordered, life)
			again.Warning = ""
			if !reflect.DeepEqual(again, plan) {
				t.Errorf("second Decide differs: %+v", again)
			}
			// A patch written as planned leads to a fixed point once the grace
			// periods are over: at once, or after the one restart a plan that
			// waits announced.
			if plan.Patch {
				write := func(p Plan) {
					b, err := json.Marshal(p.Applied)
					if err != nil {
						t.Fatal(err)
					}
					w.HasApplied, w.Applied, w.AppliedTemplateHash = true, string(b), p.TemplateRecord
				}
				write(plan)
				next := compare(w, r.sources, nil, decideNow.Add(time.Hour), r.ordered, life)
				if plan.Wait > 0 && next.Restart {
					write(next)
					next = compare(w, r.sources, nil, decideNow.Add(time.Hour), r.ordered, life)
				}
				if next.Patch || next.Restart || next.Warning != "" {
					t.Errorf("after writing the plan, Decide still wants %+v", next)
				}
			}
		})
	}
}

// FuzzDecideHostileAnnotation feeds arbitrary applied-checksums annotations.
// Decide must not panic, and must never restart a workload whose template hash
// it does not know: such an annotation says nothing about what the pods read.
func FuzzDecideHostileAnnotation(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"configmap/shop/app":""}`, `{"configmap/shop/app":null}`,
		`{"configmap/shop/app":"0123456789abcdef","secret/shop/db":""}`, `{"a":1}`, `{"configmap/shop/app":"x"`,
		"\xff\xfe", `{"configmap/shop/app":"","configmap/shop/app":"y"}`,
	} {
		f.Add(seed, "")
		f.Add(seed, tmplNow)
	}
	for _, record := range []string{tmplNow + "@100@" + webUID, tmplNow + "@10@" + webUID, tmplNow + "@100@other",
		tmplNow + "@", tmplNow + "@100@", "@100@" + webUID, tmplNow + "@0100@" + webUID, tmplNow + "@100@a@b", "@", "@@"} {
		f.Add(`{"configmap/shop/app":"0123456789abcdef","secret/shop/db":"v2:0123456789abcdef"}`, record)
	}
	// The sources were last written at resourceVersion 50.
	app := at(sourceState(f, cmApp, map[string]string{"a": "1"}), "50")
	db := at(sourceState(f, secDB, map[string]string{"pw": "x"}), "50")
	sources := sourceMap{cmApp: app, secDB: db}
	refs := []catalog.Reference{{ID: cmApp, Optional: true}, {ID: secDB, Keys: []string{"pw"}}, {ID: cmGone, Optional: true}}

	f.Fuzz(func(t *testing.T, applied, appliedHash string) {
		w := &catalog.WorkloadState{References: refs, HasApplied: true, Applied: applied,
			AppliedTemplateHash: appliedHash, TemplateHash: tmplNow}
		w.UID = webUID
		plan := compare(w, sources, graceAt(dueAt{cmApp: decideNow.Add(time.Second)}, true), decideNow, true, bothRestart)

		// Whatever was read, the plan writes a record that reads back as
		// the current template, and reaches a fixed point once written.
		if got := record.ParseTemplate(plan.TemplateRecord); got.Hash != tmplNow {
			t.Fatalf("template record %q written for template %s", plan.TemplateRecord, tmplNow)
		}
		if plan.Patch {
			written := *w
			b, _ := json.Marshal(plan.Applied)
			written.Applied, written.AppliedTemplateHash = string(b), plan.TemplateRecord
			next := compare(&written, sources, nil, decideNow.Add(time.Hour), true, bothRestart)
			if next.Restart {
				b, _ = json.Marshal(next.Applied)
				written.Applied, written.AppliedTemplateHash = string(b), next.TemplateRecord
				next = compare(&written, sources, nil, decideNow.Add(time.Hour), true, bothRestart)
			}
			if next.Patch {
				t.Fatalf("no fixed point: %+v after %+v", next, plan)
			}
		}

		if len(plan.Applied) != len(refs) {
			t.Fatalf("applied %v: want exactly one entry per reference", plan.Applied)
		}
		for _, r := range refs {
			if _, ok := plan.Applied[r.ID.String()]; !ok {
				t.Fatalf("applied %v lacks %s", plan.Applied, r.ID)
			}
		}
		if plan.Wait < 0 {
			t.Fatalf("negative wait %v", plan.Wait)
		}
		if appliedHash == "" {
			if plan.Restart || len(plan.Changed) != 0 {
				t.Fatalf("unknown template hash, annotation %q: plan %+v", applied, plan)
			}
			if !plan.Patch {
				t.Fatalf("unknown template hash must be recorded: plan %+v", plan)
			}
			// app is inside its grace period: it may have changed under pods
			// that just started, so it is pending until the period ends.
			if plan.Applied[cmApp.String()] != record.Pending || plan.Wait != time.Second ||
				plan.Applied[secDB.String()] != db.Checksum(testSums, []string{"pw"}) {
				t.Fatalf("want app pending (wait 1s) and db recorded: %+v", plan)
			}
		}
		if plan.Restart && len(plan.Changed) == 0 {
			t.Fatalf("restart without a changed source: %+v", plan)
		}
	})
}
