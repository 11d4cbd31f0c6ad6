package migrate

import (
	"slices"
	"testing"

	"github.com/restart-controller/restart-controller/internal/config"
)

// --enable-csi-integration (Helm reloader.enableCSIIntegration) adds the
// CSI driver's source kind, its reference and Reloader's secretproviderclass
// annotations; without it, none of them.
func TestConfigCSI(t *testing.T) {
	tree, _ := migrated(t, DefaultOptions(), false)
	if slices.Contains(names(tree["sources"], "name"), csiSource) {
		t.Error("CSI sources without --enable-csi-integration")
	}

	o := DefaultOptions()
	o.EnableCSIIntegration = true
	o.ResourcesToIgnore = []string{"secrets"}
	tree, res := migrated(t, o, false)
	if got := names(tree["sources"], "name"); !slices.Equal(got, []string{"configmap", csiSource}) {
		t.Errorf("sources %v", got)
	}
	if got := names(tree["references"], "source"); !slices.Contains(got, csiSource) || slices.Contains(got, "secret") {
		t.Errorf("references of %v", got)
	}
	if got := names(tree["optInAnnotations"], "annotation"); !slices.Contains(got, "secretproviderclass.reloader.stakater.com/auto") {
		t.Errorf("opt-in annotations %v", got)
	}
	if got := names(tree["sourceListAnnotations"], "annotation"); !slices.Contains(got, "secretproviderclass.reloader.stakater.com/reload") {
		t.Errorf("source-list annotations %v", got)
	}
	if got := names(tree["excludeAnnotations"], "annotation"); !slices.Contains(got, "secretproviderclasses.exclude.reloader.stakater.com/reload") {
		t.Errorf("exclude annotations %v", got)
	}
	if res.Lost() {
		t.Errorf("findings %v: CSI is carried over", res.Findings)
	}
	cfg, err := config.Parse(res.File)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.SourceLifecycle.Unknown(csiSource) {
		t.Error("the CSI kind is not of lifecycle updatesOnly")
	}
	if k := cfg.Sources[len(cfg.Sources)-1]; k.Name != csiSource || k.EnvVarKind != "SECRETPROVIDERCLASS" {
		t.Errorf("the CSI kind %+v: want Reloader's SECRETPROVIDERCLASS as envVarKind", k)
	}

	// Helm values name it reloader.enableCSIIntegration.
	v := Values{}
	if err := v.ReadValues([]byte("reloader: {enableCSIIntegration: true}")); err != nil {
		t.Fatal(err)
	}
	h, err := FromHelmValues(v, "rel")
	if err != nil {
		t.Fatal(err)
	}
	if !h.EnableCSIIntegration {
		t.Error("reloader.enableCSIIntegration not read")
	}
}
