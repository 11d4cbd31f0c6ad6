// Package logging builds the process logger and routes client-go's klog output
// into it, so every line has one format and one level switch.
package logging

import (
	"flag"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
	"k8s.io/klog/v2"
)

// New returns the root logger: text or JSON, debug level when verbose.
func New(out io.Writer, format string, verbose bool) hclog.Logger {
	level := hclog.Info
	if verbose {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "restart-controller",
		Level:      level,
		Output:     out,
		JSONFormat: format == "json",
	})
}

// Logr adapts an hclog logger to logr, the interface klog.SetLogger takes.
// klog's verbosity V(n) maps to debug for n > 0 (trace beyond 4), so client-go's
// chatty levels only show with --verbose.
func Logr(log hclog.Logger) logr.Logger { return logr.New(&sink{log: log}) }

type sink struct {
	log hclog.Logger
}

func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool {
	switch {
	case level <= 0:
		return s.log.IsInfo()
	case level <= 4:
		return s.log.IsDebug()
	default:
		return s.log.IsTrace()
	}
}

func (s *sink) Info(level int, msg string, keysAndValues ...interface{}) {
	switch {
	case level <= 0:
		s.log.Info(msg, keysAndValues...)
	case level <= 4:
		s.log.Debug(msg, keysAndValues...)
	default:
		s.log.Trace(msg, keysAndValues...)
	}
}

func (s *sink) Error(err error, msg string, keysAndValues ...interface{}) {
	s.log.Error(msg, append(keysAndValues, "error", fmt.Sprint(err))...)
}

func (s *sink) WithValues(keysAndValues ...interface{}) logr.LogSink {
	return &sink{log: s.log.With(keysAndValues...)}
}

func (s *sink) WithName(name string) logr.LogSink {
	return &sink{log: s.log.Named(name)}
}

// clientGoDebugVerbosity is the klog level shown with --verbose: client-go's
// informer, reflector and leader-election detail, but not its per-request
// lines (level 6 and up), which would drown everything else.
const clientGoDebugVerbosity = "4"

// RouteKlog sends client-go's klog output to log. klog filters V(n) lines by
// its own global verbosity before any logger sees them, so that is raised to
// clientGoDebugVerbosity when verbose. Both are process-wide: only main calls
// this.
func RouteKlog(log hclog.Logger, verbose bool) error {
	klog.SetLogger(Logr(log))
	v := "0"
	if verbose {
		v = clientGoDebugVerbosity
	}
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	if err := fs.Set("v", v); err != nil {
		return fmt.Errorf("setting klog verbosity: %w", err)
	}
	return nil
}
