package decision

import "github.com/restart-controller/restart-controller/internal/decision/decisiontest"

// Fixtures shared with the controller's tests.
var (
	sourceState   = decisiontest.SourceState
	sourceStateIn = decisiontest.SourceStateIn
	at            = decisiontest.At
	v1            = decisiontest.V1
	annotation    = decisiontest.Annotation
	testSums      = decisiontest.Sums
	otherKey      = decisiontest.OtherKey
)

type (
	sourceMap   = decisiontest.SourceMap
	dueAt       = decisiontest.DueAt
	createdOnly = decisiontest.CreatedOnly
)
