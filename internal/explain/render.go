package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/record"
)

// Output formats.
const (
	FormatTable = ""
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// CheckFormat returns an error for an unknown -o value.
func CheckFormat(format string) error {
	switch format {
	case FormatTable, FormatJSON, FormatYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use json or yaml, or leave -o out for a table", format)
}

// WriteStructured writes v as indented JSON or as YAML.
func WriteStructured(w io.Writer, v interface{}, format string) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == FormatYAML {
		if raw, err = yaml.JSONToYAML(raw); err != nil {
			return err
		}
	} else {
		raw = append(raw, '\n')
	}
	_, err = w.Write(raw)
	return err
}

// Render writes a report (*WorkloadReport or *SourceReport) in the format.
func Render(w io.Writer, report interface{}, format string) error {
	if format != FormatTable {
		return WriteStructured(w, report, format)
	}
	var b strings.Builder
	switch r := report.(type) {
	case *WorkloadReport:
		renderWorkload(&b, r)
	case *SourceReport:
		renderSource(&b, r)
	default:
		return fmt.Errorf("cannot render %T", report)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Table aligns rows of cells, as explain and status show them; an empty
// cell is shown as "-", so that every column stays visible.
type Table struct {
	tw *tabwriter.Writer
}

// NewTable returns a table written to w, its header row written.
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.Row(header...)
	return t
}

// Row adds a row of cells.
func (t *Table) Row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// Flush writes the rows, aligned. Tables are written into the
// strings.Builder a report is rendered into, whose writes cannot fail;
// Render returns the error of the one write that can.
func (t *Table) Flush() { _ = t.tw.Flush() }

func fields(w io.Writer, pairs ...string) {
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(t, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	_ = t.Flush() // into the report's strings.Builder, as Table.Flush
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// watchedText is a report's Watched field: "yes", or "no: " and why not.
func watchedText(watched bool, why string) string {
	if watched {
		return "yes"
	}
	return "no: " + why
}

func readsText(keys []string, all bool) string {
	if all {
		return "every key"
	}
	return strings.Join(keys, ", ")
}

func statusText(s string) string { return strings.ReplaceAll(s, "-", " ") }

func appliedText(applied *string) string {
	switch {
	case applied == nil:
		return "(not recorded)"
	case *applied == record.Absent:
		return "(absent)"
	}
	return *applied
}

func currentText(exists bool, current, status string) string {
	switch {
	case status == StatusUnreadable:
		return "(unreadable)"
	case !exists:
		return "(absent)"
	}
	return current
}

func renderWorkload(w io.Writer, r *WorkloadReport) {
	recorded := "no"
	switch {
	case r.RecordError != "":
		recorded = "yes, but the annotation cannot be read: " + r.RecordError
	case r.Recorded && r.TemplateRecorded:
		recorded = "yes, against the current pod template"
	case r.Recorded:
		recorded = "yes, but not against the current pod template"
	}
	pairs := []string{"Workload", r.Workload, "Namespace", r.Namespace, "Opted in", yesNo(r.OptedIn),
		"Watched", watchedText(r.Watched, r.NotWatched), "Recorded", recorded}
	if r.Problem != "" {
		pairs = append(pairs, "Problem", r.Problem)
	}
	for _, p := range r.ListProblems {
		pairs = append(pairs, "List entry skipped", p)
	}
	fields(w, pairs...)

	if len(r.Sources) == 0 {
		fmt.Fprintln(w, "\nIt reads no source.")
	} else {
		fmt.Fprintln(w)
		// The checksums share the last column, so that their width (which
		// the checksum format decides) moves no other column.
		t := NewTable(w, "SOURCE", "READS", "OPTIONAL", "STATUS", "CHECKSUM: APPLIED -> CURRENT")
		for _, s := range r.Sources {
			t.Row(shortID(s.Kind, s.Name), readsText(s.Keys, s.AllKeys), yesNo(s.Optional), statusText(s.Status),
				appliedText(s.Applied)+" -> "+currentText(s.Exists, s.Current, s.Status))
		}
		t.Flush()

		fmt.Fprintln(w)
		t = NewTable(w, "REFERENCE", "SOURCE", "READS", "OPTIONAL", "FORM")
		for _, s := range r.Sources {
			for _, u := range s.Uses {
				t.Row(u.Path, shortID(s.Kind, s.Name), readsText(u.Keys, u.AllKeys), yesNo(u.Optional), u.Reference)
			}
		}
		t.Flush()

		var notes []string
		for _, s := range r.Sources {
			if s.Status != StatusUpToDate {
				notes = append(notes, shortID(s.Kind, s.Name)+": "+s.Note)
			}
		}
		if len(notes) > 0 {
			fmt.Fprintln(w)
			for _, n := range notes {
				fmt.Fprintln(w, n)
			}
		}
	}

	renderFleet(w, r)

	fmt.Fprintf(w, "\nThe controller would now: %s\n", r.Decision.Action)
	for _, reason := range r.Decision.Reasons {
		fmt.Fprintf(w, "  - %s\n", reason)
	}
}

func renderSource(w io.Writer, r *SourceReport) {
	pairs := []string{"Source", shortID(r.Kind, r.Name), "Namespace", r.Namespace, "Exists", yesNo(r.Exists)}
	if r.Exists {
		keys := strings.Join(r.Keys, ", ")
		if keys == "" {
			keys = "(none)"
		}
		pairs = append(pairs, "Keys", keys+" (names only; values are never shown)")
	}
	pairs = append(pairs, "Watched", watchedText(r.Watched, r.NotWatched))
	if r.Key != "" {
		pairs = append(pairs, "Key", r.Key+" (only readers a change of it restarts)")
	}
	fields(w, pairs...)

	fmt.Fprintln(w)
	switch {
	case len(r.Readers) == 0 && r.Key != "":
		fmt.Fprintf(w, "A change of key %s restarts no opted-in workload.\n", r.Key)
	case len(r.Readers) == 0:
		fmt.Fprintln(w, "No opted-in workload reads it.")
	default:
		t := NewTable(w, "READER", "READS", "OPTIONAL", "STATUS", "REFERENCES")
		for _, rd := range r.Readers {
			places := make([]string, len(rd.Uses))
			for i, u := range rd.Uses {
				places[i] = u.Path
			}
			t.Row(rd.Workload, readsText(rd.Keys, rd.AllKeys), yesNo(rd.Optional), statusText(rd.Status), strings.Join(places, ", "))
		}
		t.Flush()
	}

	if len(r.ByKey) > 0 {
		fmt.Fprintln(w)
		t := NewTable(w, "A CHANGE OF KEY", "RESTARTS")
		for _, k := range r.ByKey {
			restarts := strings.Join(k.Restarts, ", ")
			if restarts == "" {
				restarts = "nothing"
			}
			t.Row(k.Key, restarts)
		}
		t.Flush()
	}
	if !r.Watched {
		fmt.Fprintln(w, "\nA change restarts nothing: the controller does not watch this namespace.")
	}
	if len(r.NotOptedIn) > 0 {
		fmt.Fprintf(w, "\nAlso read by workloads that are not opted in (never restarted): %s\n", strings.Join(r.NotOptedIn, ", "))
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "\nNot listed: %s\n", s)
	}
}

// renderFleet says what the fleet's state on the workload is: its hold and
// what ends it, and a last restart still rolling out or failed.
func renderFleet(w io.Writer, r *WorkloadReport) {
	if h := r.Hold; h != nil {
		fmt.Fprintln(w)
		switch {
		case h.Error != "":
			fmt.Fprintf(w, "Hold: unreadable (%s); %s\n", h.Error, h.EndsWhen)
		case h.InForce:
			fmt.Fprintf(w, "Hold: %s, since %s: %s\n  ends when %s\n", h.Kind, h.Since.UTC().Format(time.RFC3339), h.Cause, h.EndsWhen)
			if h.Release != "" {
				fmt.Fprintf(w, "  to end it now: %s\n", h.Release)
			}
		default:
			fmt.Fprintf(w, "Hold: %s, since %s, no longer in force: %s\n", h.Kind, h.Since.UTC().Format(time.RFC3339), h.EndsWhen)
		}
	}
	if ro := r.Rollout; ro.Open() {
		result := ro.Result
		if ro.Reason != "" {
			result += " (" + ro.Reason + ")"
		}
		fmt.Fprintf(w, "\nLast restart: %s, %s: %s\n", ro.At.UTC().Format(time.RFC3339), result, ro.Note)
		if ro.Job != "" {
			fmt.Fprintf(w, "  its run: the Job %s (kubectl get job %s -n %s)\n", ro.Job, ro.Job, r.Namespace)
		}
	}
}
