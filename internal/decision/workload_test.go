package decision

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/record"
)

// AddNamedSources adds the sources the last restart and the hold name,
// read beside those the workload reads; a name that is no source ID is
// left out, and so is a source already read or one lookup does not find.
func TestAddNamedSources(t *testing.T) {
	app := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
	db := catalog.SourceID{Kind: "secret", Namespace: "shop", Name: "db"}
	old := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "retired"}
	gone := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "gone"}
	read := &catalog.SourceState{Fields: map[string]string{"read": "already"}}
	for _, tc := range []struct {
		name   string
		w      Workload
		read   Sources
		want   []catalog.SourceID
		looked []catalog.SourceID
	}{
		{name: "no records"},
		{name: "last restart", w: Workload{LastRestart: &record.LastRestart{Sources: map[string]string{app.String(): "c1", db.String(): "c2"}}},
			want: []catalog.SourceID{app, db}, looked: []catalog.SourceID{app, db}},
		{name: "wave hold", w: Workload{Hold: &record.Hold{Kind: record.HoldWave, Source: old.String(), Change: "c3"}},
			want: []catalog.SourceID{old}, looked: []catalog.SourceID{old}},
		{name: "breaker hold names no source", w: Workload{Hold: &record.Hold{Kind: record.HoldBreaker}}},
		{name: "both, and a name that is no source", w: Workload{
			LastRestart: &record.LastRestart{Sources: map[string]string{app.String(): "c1", "not-an-id": "c4"}},
			Hold:        &record.Hold{Kind: record.HoldWave, Source: old.String()},
		}, want: []catalog.SourceID{app, old}, looked: []catalog.SourceID{app, old}},
		{name: "read already, and not found", w: Workload{LastRestart: &record.LastRestart{Sources: map[string]string{app.String(): "c1", gone.String(): "c2"}}},
			read: Sources{app: read}, want: []catalog.SourceID{app}, looked: []catalog.SourceID{gone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sources := Sources{}
			maps.Copy(sources, tc.read)
			var looked []catalog.SourceID
			tc.w.AddNamedSources(sources, func(id catalog.SourceID) (*catalog.SourceState, bool) {
				looked = append(looked, id)
				return &catalog.SourceState{}, id != gone
			})
			byID := func(a, b catalog.SourceID) int { return strings.Compare(a.String(), b.String()) }
			got := slices.SortedFunc(maps.Keys(sources), byID)
			slices.SortFunc(looked, byID)
			slices.SortFunc(tc.want, byID)
			slices.SortFunc(tc.looked, byID)
			if !slices.Equal(got, tc.want) || !slices.Equal(looked, tc.looked) {
				t.Errorf("sources %v (looked up %v), want %v (looked up %v)", got, looked, tc.want, tc.looked)
			}
			for id, state := range tc.read {
				if sources[id] != state {
					t.Errorf("%s read already, replaced by %p", id, sources[id])
				}
			}
		})
	}
}
