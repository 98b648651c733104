package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// HTMLFile is the run's report for a browser: one self-contained file (inline style, inline
// SVG, no request to anywhere), next to summary.md.
const HTMLFile = "report.html"

// consoleTail bounds the console a failure shows inline, and consolesShown how many.
const (
	consoleTail   = 64 << 10
	consolesShown = 4
)

// HTMLInput is what report.html shows.
type HTMLInput struct {
	// Dir is the artifacts folder: the failed VMIs' consoles are read from it, and every link
	// is relative to it.
	Dir     string
	Verdict verdict.Verdict
	Timings budget.Timings
	Trees   []Tree
	Repro   Repro
}

// WriteHTML writes report.html: the timeline of the phases and each pool's stages (drawn here,
// as SVG), the failures with their evidence linked and the console of the failed VMI inline,
// each pool's stages, the budget, and the Cluster API trees.
func WriteHTML(w io.Writer, in HTMLInput) error {
	v := in.Verdict
	tl := BuildTimeline(in.Timings, v.Failures)
	page := htmlPage{Verdict: v, Result: strings.ToUpper(string(v.Result)), Timeline: drawTimeline(tl), Trees: in.Trees,
		Phases: in.Timings.Phases, Marks: markRows(in.Timings, v.Start), Commit: short(in.Repro.Commit), Command: in.Repro.Command}
	if !v.Start.IsZero() && !v.End.IsZero() {
		page.When = fmt.Sprintf("%s to %s (%s)", v.Start.UTC().Format(time.RFC3339), v.End.UTC().Format(time.RFC3339), v.End.Sub(v.Start).Round(time.Second))
	}
	for _, f := range v.Failures {
		hf := htmlFailure{Failure: f, Label: verdict.Label(f.Class, f.Stage), Soft: f.Soft}
		if f.Pool != "" {
			hf.Consoles = failedConsoles(in.Dir, f)
		}
		page.Failures = append(page.Failures, hf)
	}
	for _, r := range tl.Rows {
		if r.Pool == "" {
			continue
		}
		hp := htmlPool{Name: r.Pool}
		for _, b := range r.Bars {
			hp.Stages = append(hp.Stages, htmlStage{Label: b.Label, From: secs(b.Start.Sub(tl.Start)), Took: secs(b.End.Sub(b.Start)), Failed: b.Failed()})
		}
		page.Pools = append(page.Pools, hp)
	}
	return htmlTemplate.Execute(w, page)
}

type htmlPage struct {
	Verdict  verdict.Verdict
	Result   string
	When     string
	Commit   string
	Command  string
	Timeline svgTimeline
	Failures []htmlFailure
	Pools    []htmlPool
	Marks    []markRow
	Phases   []budget.PhaseTiming
	Trees    []Tree
}

type htmlFailure struct {
	verdict.Failure
	Label    string
	Soft     bool
	Consoles []htmlConsole
}

type htmlConsole struct {
	Path, VMI, Text string
	Clipped         bool
}

type htmlPool struct {
	Name   string
	Stages []htmlStage
}

type htmlStage struct {
	Label, From, Took string
	Failed            bool
}

// failedConsoles are the serial consoles a pool failure shows inline: those of the VMIs its
// message names, else every console of its evidence, else of the pool's folder; each the last
// consoleTail bytes.
func failedConsoles(dir string, f verdict.Failure) []htmlConsole {
	var paths []string
	for _, e := range f.Evidence {
		if strings.Contains(e, "/consoles/") && strings.HasSuffix(e, ".log") {
			paths = append(paths, e)
		}
	}
	if len(paths) == 0 {
		found, _ := filepath.Glob(filepath.Join(dir, "pools", f.Pool, "consoles", "*", "*.log"))
		for _, p := range found {
			if rel, err := filepath.Rel(dir, p); err == nil {
				paths = append(paths, filepath.ToSlash(rel))
			}
		}
	}
	sort.Strings(paths)
	var named []string
	for _, p := range paths {
		if strings.Contains(f.Message, "VMI "+vmiOf(p)) {
			named = append(named, p)
		}
	}
	if len(named) > 0 {
		paths = named
	}
	var out []htmlConsole
	for _, p := range paths {
		if len(out) == consolesShown {
			break
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			continue
		}
		c := htmlConsole{Path: p, VMI: vmiOf(p)}
		if len(data) > consoleTail {
			data, c.Clipped = data[len(data)-consoleTail:], true
		}
		c.Text = string(data)
		out = append(out, c)
	}
	return out
}

// vmiOf is the VMI of a console path (pools/<pool>/consoles/<vmi>/<launcher>-<n>.log).
func vmiOf(p string) string { return filepath.Base(filepath.Dir(filepath.FromSlash(p))) }

// svgTimeline is the timeline drawn: a row per phase set and pool, a bar per phase or stage.
type svgTimeline struct {
	Width, Height, Left, Chart int
	Rows                       []svgRow
	Ticks                      []svgTick
}

type svgRow struct {
	Name, Pool string
	Y, TextY   int
	Bars       []svgBar
}

type svgBar struct {
	X, W, Y, H int
	Class      string
	Label      string
	Title      string
	TextX      int
	TextY      int
	ShowLabel  bool
}

type svgTick struct {
	X     int
	Label string
}

const (
	svgWidth  = 1100
	svgLeft   = 150
	svgRowH   = 30
	svgTop    = 28
	svgBarPad = 5
)

// drawTimeline turns the timeline into coordinates (the page draws it without a script).
func drawTimeline(tl Timeline) svgTimeline {
	chart := svgWidth - svgLeft - 20
	s := svgTimeline{Width: svgWidth, Left: svgLeft, Chart: chart, Height: svgTop + svgRowH*len(tl.Rows) + 10}
	span := tl.End.Sub(tl.Start)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) int {
		return svgLeft + int(math.Round(float64(t.Sub(tl.Start))/float64(span)*float64(chart)))
	}
	step := tickStep(span)
	for d := time.Duration(0); d <= span; d += step {
		s.Ticks = append(s.Ticks, svgTick{X: x(tl.Start.Add(d)), Label: "+" + d.String()})
	}
	for i, r := range tl.Rows {
		y := svgTop + i*svgRowH
		row := svgRow{Name: r.Name, Pool: r.Pool, Y: y, TextY: y + svgRowH/2 + 4}
		for _, b := range r.Bars {
			x0, x1 := x(b.Start), x(b.End)
			w := max(x1-x0, 2)
			class := "ok"
			switch {
			case b.Status == "failure":
				class = "failure"
			case b.Failed():
				class = "failed"
			case b.Status == "skipped":
				class = "skipped"
			}
			label := b.Label
			row.Bars = append(row.Bars, svgBar{X: x0, W: w, Y: y + svgBarPad, H: svgRowH - 2*svgBarPad, Class: class, Label: label,
				Title: b.Title, TextX: x0 + 3, TextY: y + svgRowH/2 + 4, ShowLabel: w >= 7*len(label)+6})
		}
		s.Rows = append(s.Rows, row)
	}
	return s
}

// tickStep is a round step giving at most about ten ticks over span.
func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
		if span/s <= 10 {
			return s
		}
	}
	return time.Hour
}

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"secs": func(s budget.Seconds) string { return secs(s.D()) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Lane {{.Verdict.Lane}}: {{.Result}} (exit {{.Verdict.ExitCode}})</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1140px; color: #1f2328; padding: 0 12px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; }
.pass { color: #1a7f37; } .fail, .interrupted { color: #cf222e; } .soft-fail { color: #9a6700; }
.facts { color: #59636e; } table { border-collapse: collapse; margin: 6px 0; }
td, th { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
pre { background: #f6f8fa; padding: 8px; overflow: auto; font: 12px/1.35 ui-monospace, monospace; max-height: 480px; }
.failure { border-left: 4px solid #cf222e; padding: 4px 12px; margin: 10px 0; background: #fff8f8; }
.failure.soft { border-color: #9a6700; background: #fffbe6; }
svg text { font: 12px system-ui, sans-serif; } svg .row-name { font-weight: 600; }
svg rect.ok { fill: #8cc0f0; } svg rect.failed { fill: #f0a8a8; } svg rect.failure { fill: #cf222e; } svg rect.skipped { fill: #e0e0e0; }
svg line.tick { stroke: #d0d7de; } svg .bar-label { fill: #1f2328; font-size: 11px; } svg rect.failure + text { fill: #fff; }
td.failed { color: #cf222e; font-weight: 600; }
</style>
</head>
<body>
<h1>Lane {{.Verdict.Lane}}: <span class="{{.Verdict.Result}}">{{.Result}}</span> (exit {{.Verdict.ExitCode}})</h1>
<p class="facts">{{with .Verdict.RunID}}run <code>{{.}}</code> · {{end}}{{with .Commit}}commit <code>{{.}}</code> · {{end}}{{.When}}</p>
{{with .Verdict.Reason}}<p><strong>{{.}}</strong></p>{{end}}
{{with .Verdict.Skipped}}<p>{{len .}} check(s) skipped, each with its reason (<a href="#skipped-checks">below</a>).</p>{{end}}

<h2 id="timeline">Timeline</h2>
<svg id="timeline-chart" xmlns="http://www.w3.org/2000/svg" width="{{.Timeline.Width}}" height="{{.Timeline.Height}}" viewBox="0 0 {{.Timeline.Width}} {{.Timeline.Height}}" role="img" aria-label="phases and each pool's stages in time">
{{- range .Timeline.Ticks}}
<line class="tick" x1="{{.X}}" y1="18" x2="{{.X}}" y2="{{$.Timeline.Height}}"/><text x="{{.X}}" y="13" text-anchor="middle">{{.Label}}</text>
{{- end}}
{{- range .Timeline.Rows}}
<g class="{{if .Pool}}pool{{else}}phases{{end}}"{{if .Pool}} data-pool="{{.Pool}}" id="timeline-pool-{{.Pool}}"{{end}}>
<text class="row-name" x="6" y="{{.TextY}}">{{.Name}}</text>
{{- range .Bars}}
<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" rx="2"><title>{{.Title}}</title></rect>{{if .ShowLabel}}<text class="bar-label" x="{{.TextX}}" y="{{.TextY}}">{{.Label}}</text>{{end}}
{{- end}}
</g>
{{- end}}
</svg>

<h2 id="failures">Failures</h2>
{{- if not .Failures}}
<p>None.</p>
{{- end}}
{{- range .Failures}}
<div class="failure{{if .Soft}} soft{{end}}"{{with .Pool}} data-pool="{{.}}"{{end}}>
<p><strong>{{with .Pool}}pool {{.}}: {{end}}{{.Label}}</strong>{{if .Soft}} (soft){{end}}</p>
<pre>{{.Message}}</pre>
{{- with .Evidence}}
<p>Evidence: {{range $i, $e := .}}{{if $i}}, {{end}}<a href="{{$e}}">{{$e}}</a>{{end}}</p>
{{- end}}
{{- range .Consoles}}
<details open><summary>serial console of VMI {{.VMI}} (<a href="{{.Path}}">{{.Path}}</a>){{if .Clipped}}, its last 64 KiB{{end}}</summary>
<pre class="console">{{.Text}}</pre>
</details>
{{- end}}
</div>
{{- end}}

{{- with .Marks}}
<h2 id="platform">Platform under the pools</h2>
<table><tr><th>at</th><th>from run start</th><th>component</th><th>what</th><th>detail</th></tr>
{{- range .}}
<tr><td>{{.At}}</td><td>{{.From}}</td><td>{{.Subject}}</td><td{{if .Bad}} class="failed"{{end}}>{{.What}}</td><td>{{.Detail}}</td></tr>
{{- end}}
</table>
{{- end}}

{{- with .Verdict.Skipped}}
<h2 id="skipped-checks">Skipped checks</h2>
<table><tr><th>pool</th><th>spec</th><th>check</th><th>reason</th></tr>
{{- range .}}
<tr class="skipped-check"{{with .Pool}} data-pool="{{.}}"{{end}}><td>{{or .Pool "-"}}</td><td>{{.Spec}}</td><td>{{.Check}}</td><td>{{.Reason}}</td></tr>
{{- end}}
</table>
{{- end}}

<h2 id="pools">Pools: join stages</h2>
{{- range .Pools}}
<h3>pool {{.Name}}</h3>
<table data-pool="{{.Name}}"><tr><th>stage</th><th>from run start</th><th>took</th></tr>
{{- range .Stages}}
<tr><td{{if .Failed}} class="failed"{{end}}>{{.Label}}</td><td>+{{.From}}</td><td>{{.Took}}</td></tr>
{{- end}}
</table>
{{- end}}

<h2 id="budget">Budget: planned against spent</h2>
<table><tr><th>phase</th><th>ceiling</th><th>spent</th><th>outcome</th></tr>
{{- range .Phases}}
<tr><td>{{.Name}}</td><td>{{secs .Planned}}</td><td>{{secs .Spent}}</td><td{{if or (eq .Outcome "failed") (eq .Outcome "deadline")}} class="failed"{{end}}>{{.Outcome}}{{with .Error}}: {{.}}{{end}}{{with .Note}}: {{.}}{{end}}</td></tr>
{{- end}}
</table>

{{- with .Trees}}
<h2 id="cluster-api">Cluster API: clusterctl describe cluster</h2>
{{- range .}}
<details><summary>{{.Title}} (<a href="{{.Path}}">{{.Path}}</a>)</summary>
<pre>{{.Text}}</pre>
</details>
{{- end}}
{{- end}}

<h2 id="files">Files</h2>
<p><a href="summary.md">summary.md</a> · <a href="verdict.json">verdict.json</a> · <a href="junit.xml">junit.xml</a> · <a href="timings.json">timings.json</a> · <a href="manifest.json">manifest.json</a> · <a href="harness.log">harness.log</a> · <a href="repro.txt">repro.txt</a></p>
{{- with .Command}}
<pre>{{.}}</pre>
{{- end}}
<script>
// The timeline's pools as the browser laid them out (a row drawn with no width is missing).
(function () {
  var drawn = [];
  document.querySelectorAll("#timeline-chart g.pool").forEach(function (g) {
    var b = g.getBBox();
    if (b.width > 0 && b.height > 0) { drawn.push(g.getAttribute("data-pool")); }
  });
  document.body.setAttribute("data-drawn-pools", drawn.join(","));
})();
</script>
</body>
</html>
`))
