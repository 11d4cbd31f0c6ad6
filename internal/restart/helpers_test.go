package restart

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision/decisiontest"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

const examplePath = "../../examples/config.yaml"

// Annotation keys of the example source, spelled out so that a silent change
// of the defaults shows up here.
const (
	optInKey        = "com.xing.deployment-restart"
	appliedKey      = "com.xing.deployment-restart.applied-config-checksums"
	templateHashKey = "com.xing.deployment-restart.applied-template-hash"
	timestampKey    = "com.xing.deployment-restart.timestamp"
	rolloutKey      = "com.xing.deployment-restart.rollout"
	holdKey         = "com.xing.deployment-restart.hold"
	releaseKey      = "com.xing.deployment-restart.release"
	ignoreKey       = "com.xing.deployment-restart.ignore"
	ignoreSrcKey    = "com.xing.deployment-restart.ignore-sources"
	strategyKey     = "com.xing.deployment-restart.strategy"
)

func exampleConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg := testfixture.ExampleConfig(t)
	want := config.Annotations{OptIn: optInKey, AppliedChecksums: appliedKey, RestartTimestamp: timestampKey, AppliedTemplateHash: templateHashKey,
		Rollout: rolloutKey, Hold: holdKey, Release: releaseKey, Ignore: ignoreKey, IgnoreSources: ignoreSrcKey,
		RestartStrategy: strategyKey}
	if cfg.Annotations != want {
		t.Fatalf("example annotations %+v, want %+v", cfg.Annotations, want)
	}
	return cfg
}

func fromYAML(t testing.TB, s string) *unstructured.Unstructured { return testfixture.FromYAML(t, s) }

// Fixtures shared with the decision's tests.
var (
	sourceState = decisiontest.SourceState
	v1          = decisiontest.V1
	annotation  = decisiontest.Annotation
	testSums    = decisiontest.Sums
)

var (
	cmApp  = catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
	secDB  = catalog.SourceID{Kind: "secret", Namespace: "shop", Name: "db"}
	cmGone = catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "retired"}
)
