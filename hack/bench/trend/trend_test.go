package trend

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func fixtureRun(commit string, rssScale float64) Run {
	res := func(scenario string, scale int, prog string, rss, p99 float64) Result {
		r := Result{Scenario: scenario, Scale: scale, Program: prog, PeakRSSMiB: rss * rssScale, CPUToReadySeconds: 1}
		if prog != Floor {
			r.FanOut = []Latency{{Changes: 200, P50Seconds: p99 / 3, P99Seconds: p99 / 2}, {Changes: 1000, P50Seconds: p99 / 2, P99Seconds: p99}}
		}
		return r
	}
	return Run{Commit: commit, Date: "2026-11-25T16:00:00Z", Machine: "2 CPUs", Clean: true, Results: []Result{
		res("default", 1, Floor, 30, 0), res("default", 1, Controller, 55, 3.2), res("default", 1, Patcher, 28, 2.9),
		res("default", 4, Floor, 31, 0), res("default", 4, Controller, 54, 5.5), res("default", 4, Patcher, 29, 4.1),
		res("10k", 1, Floor, 85, 0), res("10k", 1, Controller, 108.8, 4.2), res("10k", 1, Patcher, 65, 4.1),
	}}
}

func TestAppendKeepsEveryEarlierRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "BENCHMARKS.json")
	for i, c := range []string{"a1", "b2", "c3"} {
		tf, err := Append(file, fixtureRun(c, 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(tf.Runs) != i+1 || tf.Runs[i].Commit != c {
			t.Fatalf("after %s: %d runs", c, len(tf.Runs))
		}
	}
	tf, err := Read(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(tf.Runs) != 3 || tf.Runs[0].Commit != "a1" || tf.Runs[2].Commit != "c3" || tf.About == "" {
		t.Errorf("read back %d runs (%+v)", len(tf.Runs), tf.Runs)
	}
	if got := tf.Runs[1].Results[1]; got.Program != Controller || got.PeakRSSMiB != 55 || got.FanOut[1].P99Seconds != 3.2 {
		t.Errorf("figures changed on the way: %+v", got)
	}
}

func TestReadRejectsAFileThatIsNotATrend(t *testing.T) {
	file := filepath.Join(t.TempDir(), "BENCHMARKS.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Append(file, fixtureRun("a", 1)); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Append over a broken file: err = %v, want one naming the file", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "{not json" {
		t.Errorf("a broken file was overwritten: %q", b)
	}
	tf, err := Read(filepath.Join(t.TempDir(), "missing.json"))
	if err != nil || len(tf.Runs) != 0 {
		t.Errorf("missing file: %v, %d runs; want an empty history", err, len(tf.Runs))
	}
}

// svgPanel is what the test reads back of a drawn panel.
type svgPanel struct {
	title      string
	ymin, ymax float64
	series     map[string][]float64 // cy of each point
	values     map[string][]float64 // the values its tooltips name
}

// parseSVG decodes the document token by token (it must be well-formed
// XML) and collects each panel's series.
func parseSVG(t *testing.T, b []byte) []*svgPanel {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var panels []*svgPanel
	var cur *svgPanel
	var series string
	var inTitle, inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			a := map[string]string{}
			for _, at := range el.Attr {
				a[at.Name.Local] = at.Value
			}
			switch {
			case el.Name.Local == "g" && a["class"] == "panel":
				cur = &svgPanel{series: map[string][]float64{}, values: map[string][]float64{}}
				cur.ymin, _ = strconv.ParseFloat(a["data-ymin"], 64)
				cur.ymax, _ = strconv.ParseFloat(a["data-ymax"], 64)
				panels = append(panels, cur)
			case el.Name.Local == "g" && a["class"] == "series":
				series = a["data-series"]
				cur.series[series] = cur.series[series][:0:0]
			case el.Name.Local == "circle":
				cy, _ := strconv.ParseFloat(a["cy"], 64)
				cur.series[series] = append(cur.series[series], cy)
			case el.Name.Local == "title":
				inTitle = true
			case el.Name.Local == "text":
				inText = true
			}
		case xml.EndElement:
			inTitle = inTitle && el.Name.Local != "title"
			inText = inText && el.Name.Local != "text"
		case xml.CharData:
			if inTitle {
				f := strings.Fields(string(el))
				v, _ := strconv.ParseFloat(f[len(f)-2], 64)
				cur.values[series] = append(cur.values[series], v)
			} else if inText && cur != nil && cur.title == "" {
				cur.title = string(el)
			}
		}
	}
	return panels
}

func TestPlotDrawsEveryProgramWithinItsAxes(t *testing.T) {
	tf := File{Runs: []Run{fixtureRun("old", 1.1), fixtureRun("new", 1)}}
	b, err := Plot(tf)
	if err != nil {
		t.Fatal(err)
	}
	panels := parseSVG(t, b)
	if len(panels) != 4 {
		t.Fatalf("%d panels, want peak RSS and p99 of the latest run, and both over the runs", len(panels))
	}
	rss, p99, hist := panels[0], panels[1], panels[2]
	if len(rss.series) != 3 || rss.series[Controller] == nil || rss.series[Floor] == nil || rss.series[Patcher] == nil {
		t.Errorf("peak RSS panel: series %v, want one per program", keys(rss.series))
	}
	if len(p99.series) != 2 || p99.series[Controller] == nil || p99.series[Patcher] == nil {
		t.Errorf("p99 panel: series %v, want the controller and the patcher (the floor has no latency)", keys(p99.series))
	}
	if got := rss.values[Controller]; len(got) != 3 || got[0] != 55 || got[1] != 54 || got[2] != 108.8 {
		t.Errorf("latest run's controller peak RSS points %v, want 55, 54, 108.8 (scales, then 10k)", got)
	}
	if got := p99.values[Patcher]; len(got) != 3 || got[1] != 4.1 {
		t.Errorf("p99 points %v: want the largest fan-out's p99", got)
	}
	// A later run of one scenario replaces that scenario's points only.
	only10k := fixtureRun("newest", 2)
	only10k.Results = only10k.Results[6:]
	b, err = Plot(File{Runs: append(tf.Runs, only10k)})
	if err != nil {
		t.Fatal(err)
	}
	if got := parseSVG(t, b)[0].values[Controller]; len(got) != 3 || got[0] != 55 || got[2] != 217.6 {
		t.Errorf("after a run of 10k alone, controller peak RSS points %v, want 55, 54 (default, earlier run), 217.6 (10k, newest)", got)
	}
	if len(hist.series) != 3 || len(hist.series["default ×1"]) != 2 {
		t.Errorf("history: series %v, want one per scenario and scale, a point per run", keys(hist.series))
	}
	for _, p := range panels {
		for name, vs := range p.values {
			for _, v := range vs {
				if v < p.ymin || v > p.ymax {
					t.Errorf("panel %q, %s: %g outside the axis [%g, %g]", p.title, name, v, p.ymin, p.ymax)
				}
			}
		}
		for name, cys := range p.series {
			for _, cy := range cys {
				if cy < marginTop-0.01 || cy > panelH-marginBottom+0.01 || math.IsNaN(cy) {
					t.Errorf("panel %q, %s: point at y %g outside the plot area", p.title, name, cy)
				}
			}
		}
	}
}

func TestPlotOfNoRunsIsStillADocument(t *testing.T) {
	b, err := Plot(File{})
	if err != nil {
		t.Fatal(err)
	}
	if panels := parseSVG(t, b); len(panels) != 0 || !bytes.Contains(b, []byte("no runs yet")) || bytes.Contains(b, []byte(`height="0"`)) {
		t.Errorf("empty plot: %d panels\n%s", len(panels), b)
	}
}

func TestYRangeContainsEveryPoint(t *testing.T) {
	for _, top := range []float64{0.004, 0.9, 1, 3.2, 54.1, 108.8, 999, 1001} {
		p := panel{series: []series{{points: []point{{0, top / 2, ""}, {1, top, ""}}}}}
		lo, hi := p.yRange()
		if lo != 0 || hi < top || hi > 2.5*top {
			t.Errorf("yRange with top %g = [%g, %g], want [0, a round number ≥ %g and close to it]", top, lo, hi, top)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
