package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Problem is one problem of a configuration, under the path of the key it
// concerns, e.g. "workloads[2].podTemplatePath".
type Problem struct {
	Path string
	// Origin says where the value came from when not the config file, e.g.
	// "env WORKERS": a path alone points at the file.
	Origin string
	Err    error
}

func (p Problem) Error() string {
	if p.Origin != "" {
		return p.Path + " (" + p.Origin + "): " + p.Err.Error()
	}
	return p.Path + ": " + p.Err.Error()
}

func (p Problem) Unwrap() error { return p.Err }

// problems collects every problem found in a configuration.
type problems struct {
	list []Problem
	// undecodable holds paths whose value failed to decode; checks on what
	// was decoded there would only repeat the problem.
	undecodable map[string]bool
	// origins maps keys layered from elsewhere than the file to their origin.
	origins map[string]string
}

// newProblems starts with earlier's problems; origins may be nil: it is only read.
func newProblems(origins map[string]string, earlier []Problem) *problems {
	return &problems{list: append([]Problem(nil), earlier...), undecodable: map[string]bool{}, origins: origins}
}

func (p *problems) decodeFailed(path string, err error) {
	p.undecodable[path] = true
	p.list = append(p.list, Problem{Path: path, Err: err})
}

// add reports a validation problem, unless decoding already failed there.
func (p *problems) add(path string, err error) {
	for failed := range p.undecodable {
		if within(path, failed) {
			return
		}
	}
	p.list = append(p.list, Problem{Path: path, Err: err})
}

// failedWithin reports whether decoding failed at path or anywhere below it.
func (p *problems) failedWithin(path string) bool {
	for failed := range p.undecodable {
		if within(failed, path) {
			return true
		}
	}
	return false
}

func (p *problems) addf(path, format string, args ...interface{}) {
	p.add(path, fmt.Errorf(format, args...))
}

// err returns every problem sorted by path, indexes in numeric order, or nil.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	list := append([]Problem(nil), p.list...)
	sort.SliceStable(list, func(i, j int) bool { return lessPath(list[i].Path, list[j].Path) })
	errs := make([]error, len(list))
	for i, pr := range list {
		if pr.Origin == "" {
			pr.Origin = p.originOf(pr.Path)
		}
		errs[i] = pr
	}
	return errors.Join(errs...)
}

func (p *problems) originOf(path string) string {
	for key, origin := range p.origins {
		if within(path, key) {
			return origin
		}
	}
	return ""
}

// within reports whether path is root or lies below it.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root) && strings.ContainsRune(".[", rune(path[len(root)]))
}

// lessPath orders paths naturally, so that "x[2]" sorts before "x[10]".
func lessPath(a, b string) bool {
	for a != "" && b != "" {
		ca, cb := chunk(a), chunk(b)
		if ca != cb {
			na, errA := strconv.Atoi(ca)
			nb, errB := strconv.Atoi(cb)
			if errA == nil && errB == nil {
				return na < nb
			}
			return ca < cb
		}
		a, b = a[len(ca):], b[len(cb):]
	}
	return len(a) < len(b)
}

// chunk returns s's leading run of digits, or of non-digits.
func chunk(s string) string {
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	i := 1
	for i < len(s) && digit(s[i]) == digit(s[0]) {
		i++
	}
	return s[:i]
}
