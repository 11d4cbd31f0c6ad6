package decision

import (
	"slices"
	"strings"
	"testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/record"
)

// NamedSources are the sources the last restart and the hold name, read
// beside those the workload reads; a name that is no source ID is left out.
func TestNamedSources(t *testing.T) {
	app := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
	db := catalog.SourceID{Kind: "secret", Namespace: "shop", Name: "db"}
	old := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "retired"}
	for _, tc := range []struct {
		name string
		w    Workload
		want []catalog.SourceID
	}{
		{name: "no records"},
		{name: "last restart", w: Workload{LastRestart: &record.LastRestart{Sources: map[string]string{app.String(): "c1", db.String(): "c2"}}},
			want: []catalog.SourceID{app, db}},
		{name: "wave hold", w: Workload{Hold: &record.Hold{Kind: record.HoldWave, Source: old.String(), Change: "c3"}}, want: []catalog.SourceID{old}},
		{name: "breaker hold names no source", w: Workload{Hold: &record.Hold{Kind: record.HoldBreaker}}},
		{name: "both, and a name that is no source", w: Workload{
			LastRestart: &record.LastRestart{Sources: map[string]string{app.String(): "c1", "not-an-id": "c4"}},
			Hold:        &record.Hold{Kind: record.HoldWave, Source: old.String()},
		}, want: []catalog.SourceID{app, old}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.w.NamedSources()
			byID := func(a, b catalog.SourceID) int { return strings.Compare(a.String(), b.String()) }
			slices.SortFunc(got, byID)
			slices.SortFunc(tc.want, byID)
			if !slices.Equal(got, tc.want) {
				t.Errorf("NamedSources() = %v, want %v", got, tc.want)
			}
		})
	}
}
