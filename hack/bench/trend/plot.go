package trend

import (
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The plot of the trend file: the latest run's peak RSS and fan-out p99
// against scale (each scenario at each scale), one series per program; and
// the controller's figures over every run, one series per scenario and
// scale. Drawn with encoding/xml, so that every name is escaped and the
// document is well-formed, with nothing more than the standard library.

// series is one line of a panel: a point per x position it has a figure for.
type series struct {
	name   string
	color  string
	points []point
}

type point struct {
	x     int // index into the panel's x labels
	y     float64
	group string // points of one group are joined by a line (one scenario's scales, or every run)
}

// panel is one chart.
type panel struct {
	title, unit string
	xLabels     []string
	series      []series
}

// yRange is [0, a round number at or above every point].
func (p panel) yRange() (lo, hi float64) {
	for _, s := range p.series {
		for _, pt := range s.points {
			hi = max(hi, pt.y)
		}
	}
	if hi <= 0 {
		return 0, 1
	}
	step := math.Pow(10, math.Floor(math.Log10(hi)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*step >= hi {
			return 0, m * step
		}
	}
	return 0, 10 * step
}

// The programs' names, as the benchmark reports them.
const (
	Controller = "controller"
	Floor      = "floor"
	Patcher    = "zero-logic patcher"
)

var programColors = map[string]string{Controller: "#1f77b4", Floor: "#7f7f7f", Patcher: "#ff7f0e"}

var historyColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"}

// Plot draws the trend file as SVG.
func Plot(tf File) ([]byte, error) {
	panels := latestPanels(tf)
	panels = append(panels, historyPanels(tf)...)
	doc := svgDoc{Xmlns: "http://www.w3.org/2000/svg", Width: 2 * panelW, Height: max(panelH*((len(panels)+1)/2), 50), FontFamily: "sans-serif", FontSize: 11}
	doc.Items = append(doc.Items, svgRect{X: 0, Y: 0, W: doc.Width, H: doc.Height, Fill: "white"})
	if len(tf.Runs) == 0 {
		doc.Items = append(doc.Items, svgText{X: 20, Y: 30, Text: "no runs yet: `make bench` appends to BENCHMARKS.json"})
	}
	for i, p := range panels {
		doc.Items = append(doc.Items, p.draw(float64(i%2*panelW), float64(i/2*panelH)))
	}
	b, err := xml.MarshalIndent(doc, "", " ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

// latestPanels are peak RSS and the largest fan-out's p99 of each
// scenario's latest run, per scale, one series per program: a run of one
// scenario leaves the others' points as they were.
func latestPanels(tf File) []panel {
	if len(tf.Runs) == 0 {
		return nil
	}
	latest := map[string]Run{} // per scenario
	var order []string         // scenario ×scale, in order of first appearance
	for _, run := range tf.Runs {
		for _, r := range run.Results {
			latest[r.Scenario] = run
			xIndex(&order, fmt.Sprintf("%s ×%d", r.Scenario, r.Scale))
		}
	}
	rss := panel{title: "Peak RSS, latest run of each scenario", unit: "MiB", xLabels: order}
	p99 := panel{title: "p99, largest simultaneous change, latest run of each scenario", unit: "s", xLabels: order}
	for _, sc := range scenarioOrder(tf) {
		run := latest[sc]
		for _, r := range run.Results {
			if r.Scenario != sc {
				continue
			}
			x := xIndex(&order, fmt.Sprintf("%s ×%d", r.Scenario, r.Scale))
			add(&rss.series, r.Program, programColors[r.Program], point{x, r.PeakRSSMiB, r.Scenario})
			if l, ok := largestFanOut(r); ok {
				add(&p99.series, r.Program, programColors[r.Program], point{x, l.P99Seconds, r.Scenario})
			}
		}
	}
	for _, p := range []*panel{&rss, &p99} {
		slices.SortStableFunc(p.series, func(a, b series) int { return programRank(a.name) - programRank(b.name) })
	}
	return []panel{rss, p99}
}

// programRank puts the controller first, then the floor, then the patcher.
func programRank(name string) int {
	return slices.Index([]string{Controller, Floor, Patcher}, name)
}

// scenarioOrder lists the scenarios in order of first appearance.
func scenarioOrder(tf File) []string {
	var out []string
	for _, run := range tf.Runs {
		for _, r := range run.Results {
			xIndex(&out, r.Scenario)
		}
	}
	return out
}

// historyPanels are the controller's peak RSS and largest fan-out p99 over
// the runs, one series per scenario and scale.
func historyPanels(tf File) []panel {
	if len(tf.Runs) == 0 {
		return nil
	}
	rss := panel{title: "Controller's peak RSS, every run (by commit)", unit: "MiB"}
	p99 := panel{title: "Controller's p99, largest simultaneous change, every run", unit: "s"}
	var names []string
	for i, run := range tf.Runs {
		label := run.Commit // the date would not fit under the axis
		rss.xLabels = append(rss.xLabels, label)
		p99.xLabels = append(p99.xLabels, label)
		for _, r := range run.Results {
			if r.Program != Controller {
				continue
			}
			name := fmt.Sprintf("%s ×%d", r.Scenario, r.Scale)
			color := historyColors[xIndex(&names, name)%len(historyColors)]
			add(&rss.series, name, color, point{i, r.PeakRSSMiB, ""})
			if l, ok := largestFanOut(r); ok {
				add(&p99.series, name, color, point{i, l.P99Seconds, ""})
			}
		}
	}
	return []panel{rss, p99}
}

func largestFanOut(r Result) (Latency, bool) {
	if len(r.FanOut) == 0 {
		return Latency{}, false
	}
	return slices.MaxFunc(r.FanOut, func(a, b Latency) int { return a.Changes - b.Changes }), true
}

// xIndex returns label's index in labels, appending it when new.
func xIndex(labels *[]string, label string) int {
	if i := slices.Index(*labels, label); i >= 0 {
		return i
	}
	*labels = append(*labels, label)
	return len(*labels) - 1
}

// add appends a point to the named series, creating it when new.
func add(ss *[]series, name, color string, pt point) {
	for i := range *ss {
		if (*ss)[i].name == name {
			(*ss)[i].points = append((*ss)[i].points, pt)
			return
		}
	}
	*ss = append(*ss, series{name: name, color: color, points: []point{pt}})
}

// Panel geometry, in SVG units.
const (
	panelW, panelH          = 480, 300
	marginL, marginR        = 55, 15
	marginTop, marginBottom = 30, 75
)

// draw renders the panel with its top-left corner at (ox, oy).
func (p panel) draw(ox, oy float64) svgGroup {
	g := svgGroup{Class: "panel", Transform: fmt.Sprintf("translate(%g,%g)", ox, oy)}
	lo, hi := p.yRange()
	g.YMin, g.YMax = fmt.Sprint(lo), fmt.Sprint(hi)
	left, right, top, bottom := float64(marginL), float64(panelW-marginR), float64(marginTop), float64(panelH-marginBottom)
	xOf := func(i int) float64 {
		if len(p.xLabels) <= 1 {
			return (left + right) / 2
		}
		return left + 50 + float64(i)*(right-left-100)/float64(len(p.xLabels)-1)
	}
	yOf := func(v float64) float64 { return bottom - (v-lo)/(hi-lo)*(bottom-top) }
	g.Items = append(g.Items,
		svgText{X: left, Y: 18, Text: p.title, FontWeight: "bold"},
		svgLine{X1: left, Y1: top, X2: left, Y2: bottom, Stroke: "black"},
		svgLine{X1: left, Y1: bottom, X2: right, Y2: bottom, Stroke: "black"})
	for k := 0; k <= 4; k++ {
		v := lo + (hi-lo)*float64(k)/4
		g.Items = append(g.Items,
			svgLine{X1: left, Y1: yOf(v), X2: right, Y2: yOf(v), Stroke: "#e0e0e0"},
			svgText{X: left - 5, Y: yOf(v) + 4, Anchor: "end", Text: fmt.Sprintf("%g %s", v, p.unit)})
	}
	// At most 4 labels under the axis (the history grows); every point
	// names its own in its tooltip.
	step := (len(p.xLabels) + 3) / 4
	for i, l := range p.xLabels {
		if i%step == 0 || i == len(p.xLabels)-1 && len(p.xLabels) <= 4 {
			g.Items = append(g.Items, svgText{X: xOf(i), Y: bottom + 14, Anchor: "middle", Text: l})
		}
	}
	for k, s := range p.series {
		sg := svgGroup{Class: "series", Series: s.name}
		lines := map[string][]string{}
		var groups []string
		for _, pt := range s.points {
			if lines[pt.group] == nil {
				groups = append(groups, pt.group)
			}
			lines[pt.group] = append(lines[pt.group], fmt.Sprintf("%.1f,%.1f", xOf(pt.x), yOf(pt.y)))
		}
		for _, gr := range groups {
			sg.Items = append(sg.Items, svgPolyline{Points: strings.Join(lines[gr], " "), Stroke: s.color, Fill: "none", Width: 2})
		}
		for _, pt := range s.points {
			sg.Items = append(sg.Items, svgCircle{CX: xOf(pt.x), CY: yOf(pt.y), R: 3.5, Fill: s.color,
				Title: &svgTitle{Text: fmt.Sprintf("%s, %s: %g %s", s.name, p.xLabels[pt.x], pt.y, p.unit)}})
		}
		ly := bottom + 32 + float64(k/3)*14
		lx := left + float64(k%3)*140
		sg.Items = append(sg.Items, svgRect{X: lx, Y: ly - 8, W: 10, H: 10, Fill: s.color}, svgText{X: lx + 14, Y: ly, Text: s.name})
		g.Items = append(g.Items, sg)
	}
	return g
}

type svgDoc struct {
	XMLName    xml.Name `xml:"svg"`
	Xmlns      string   `xml:"xmlns,attr"`
	Width      int      `xml:"width,attr"`
	Height     int      `xml:"height,attr"`
	FontFamily string   `xml:"font-family,attr"`
	FontSize   int      `xml:"font-size,attr"`
	Items      []any
}

type svgGroup struct {
	XMLName   xml.Name `xml:"g"`
	Class     string   `xml:"class,attr,omitempty"`
	Series    string   `xml:"data-series,attr,omitempty"`
	YMin      string   `xml:"data-ymin,attr,omitempty"`
	YMax      string   `xml:"data-ymax,attr,omitempty"`
	Transform string   `xml:"transform,attr,omitempty"`
	Items     []any
}

type svgRect struct {
	XMLName xml.Name `xml:"rect"`
	X       float64  `xml:"x,attr"`
	Y       float64  `xml:"y,attr"`
	W       int      `xml:"width,attr"`
	H       int      `xml:"height,attr"`
	Fill    string   `xml:"fill,attr"`
}

type svgLine struct {
	XMLName xml.Name `xml:"line"`
	X1      float64  `xml:"x1,attr"`
	Y1      float64  `xml:"y1,attr"`
	X2      float64  `xml:"x2,attr"`
	Y2      float64  `xml:"y2,attr"`
	Stroke  string   `xml:"stroke,attr"`
}

type svgText struct {
	XMLName    xml.Name `xml:"text"`
	X          float64  `xml:"x,attr"`
	Y          float64  `xml:"y,attr"`
	Anchor     string   `xml:"text-anchor,attr,omitempty"`
	FontWeight string   `xml:"font-weight,attr,omitempty"`
	Text       string   `xml:",chardata"`
}

type svgPolyline struct {
	XMLName xml.Name `xml:"polyline"`
	Points  string   `xml:"points,attr"`
	Stroke  string   `xml:"stroke,attr"`
	Fill    string   `xml:"fill,attr"`
	Width   float64  `xml:"stroke-width,attr"`
}

type svgCircle struct {
	XMLName xml.Name  `xml:"circle"`
	CX      float64   `xml:"cx,attr"`
	CY      float64   `xml:"cy,attr"`
	R       float64   `xml:"r,attr"`
	Fill    string    `xml:"fill,attr"`
	Title   *svgTitle `xml:"title"`
}

type svgTitle struct {
	Text string `xml:",chardata"`
}
