package restart

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/hashicorp/go-hclog"
	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/decision/decisiontest"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/notify"
	"github.com/restart-controller/restart-controller/internal/pacing"
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
	windowKey       = "com.xing.deployment-restart.window"
	minIntervalKey  = "com.xing.deployment-restart.min-interval"
)

func exampleConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg := testfixture.ExampleConfig(t)
	want := config.Annotations{OptIn: optInKey, AppliedChecksums: appliedKey, RestartTimestamp: timestampKey, AppliedTemplateHash: templateHashKey,
		Rollout: rolloutKey, Hold: holdKey, Release: releaseKey, Ignore: ignoreKey, IgnoreSources: ignoreSrcKey,
		RestartStrategy: strategyKey, Window: windowKey, MinInterval: minIntervalKey}
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

// newController builds a controller as main does, over the caches cat and a
// fake dynamic client that takes its patches, at reconcileNow: no key
// reader (a large source fails to reconcile), Events to a fakeRecorder,
// notifications to nobody, every write fresh.
func newController(t testing.TB, cfg *config.Config, cat *catalog.Catalog, client dynamic.Interface, exists ExistsFunc) *Controller {
	t.Helper()
	rules := decision.NewRules(cfg, testSums)
	c, err := New(Deps{
		Config: cfg, Rules: rules, Catalog: cat,
		// The process started long before the tests' clock (the breaker's
		// quiet time counts from its start at the latest).
		Pacing: pacing.New(pacing.Deps{Catalog: cat, Rules: rules, Started: reconcileNow.Add(-24 * time.Hour)}),
		Client: client, Patch: dynamicPatch(client), Fresh: func() bool { return true }, Exists: exists,
		Keys: noKeyReader{}, Events: &fakeRecorder{}, Notify: discard{},
		Metrics: metrics.New(func() (int, int) { return 0, 0 }), Log: hclog.NewNullLogger(),
		Clock: func() time.Time { return reconcileNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	return c
}

// dynamicPatch sends the controller's patches through the fake dynamic
// client, whose actions the tests read (APIPatch is tested on its own).
func dynamicPatch(client dynamic.Interface) PatchFunc {
	return func(ctx context.Context, key catalog.WorkloadKey, body []byte) error {
		_, err := client.Resource(key.Resource).Namespace(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager})
		return err
	}
}

// noKeyReader reads no keys: a test whose workload reads keys of a large
// source gives the controller a keyread.Reader.
type noKeyReader struct{}

func (noKeyReader) Read(_ context.Context, id catalog.SourceID, _ *catalog.SourceState, _ []string) (*catalog.SourceState, error) {
	return nil, fmt.Errorf("%s: no key reader in this test", id)
}

// discard takes notifications and drops them.
type discard struct{}

func (discard) Notify(notify.Message) {}
