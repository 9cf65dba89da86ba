package main

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
)

// chart is a grouped horizontal bar chart: one block per scenario, one row
// per server, and side by side one panel per metric. Each panel is scaled
// to its largest value within a block, so a block compares the servers on
// one workload; every bar has its value printed at its end.
type chart struct {
	title  string
	note   string
	panels []string // panel headings
	blocks []chartBlock
}

type chartBlock struct {
	title string
	rows  []chartRow
}

type chartRow struct {
	label  string
	values []float64 // one per panel; NaN = no value
	texts  []string  // printed next to each bar
}

// Geometry, in SVG user units (pixels).
const (
	chartWidth   = 1000
	chartMargin  = 12
	labelWidth   = 112
	panelGap     = 18
	rowHeight    = 19
	barHeight    = 13
	blockHead    = 22
	blockGap     = 8
	charWidth    = 6.3 // average width of an 11 px sans-serif character
	chartTopArea = 74
)

// serverColors keeps a server's color the same in every chart.
var serverColors = map[string]string{
	"veloq-uring":   "#1d4ed8",
	"veloq-epoll":   "#60a5fa",
	"veloq-inline":  "#1d4ed8",
	"veloq-offload": "#7c3aed",
	"veloq-fromstd": "#0891b2",
	"stdlib":        "#6b7280",
	"netpoll":       "#d97706",
	"hertz":         "#dc2626",
	"gnet":          "#ca8a04",
	"nbio":          "#be185d",
	"fasthttp":      "#9333ea",
	"nginx":         "#059669",
	"c-epoll":       "#111827",
	"c-uring":       "#44403c",
}

func colorOf(server string) string {
	if c, ok := serverColors[server]; ok {
		return c
	}
	return "#9ca3af"
}

// esc escapes text for SVG character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// svg renders the chart.
func (c chart) svg() []byte {
	n := max(len(c.panels), 1)
	// Room for the longest printed value after the bars.
	textW := 0.0
	for _, bl := range c.blocks {
		for _, r := range bl.rows {
			for _, t := range r.texts {
				textW = max(textW, float64(len([]rune(t)))*charWidth+8)
			}
		}
	}
	panelW := float64(chartWidth-2*chartMargin-labelWidth-panelGap*(n-1)) / float64(n)
	barMax := max(panelW-textW, panelW/3)
	height := chartTopArea + chartMargin
	for _, bl := range c.blocks {
		height += blockHead + len(bl.rows)*rowHeight + blockGap
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n",
		chartWidth, height, chartWidth, height)
	// An opaque background keeps the dark text readable in dark themes.
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold" fill="#111827">%s</text>`+"\n", chartMargin, esc(c.title))
	if c.note != "" {
		fmt.Fprintf(&b, `<text x="%d" y="43" font-size="11" fill="#4b5563">%s</text>`+"\n", chartMargin, esc(c.note))
	}
	px := func(i int) float64 { return chartMargin + labelWidth + float64(i)*(panelW+panelGap) }
	for i, p := range c.panels {
		fmt.Fprintf(&b, `<text x="%.1f" y="66" font-size="12" font-weight="bold" fill="#111827">%s</text>`+"\n", px(i), esc(p))
	}

	y := float64(chartTopArea)
	for _, bl := range c.blocks {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e7eb"/>`+"\n", chartMargin, y+2, chartWidth-chartMargin, y+2)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="12" font-weight="bold" fill="#374151">%s</text>`+"\n", chartMargin, y+17, esc(bl.title))
		y += blockHead
		peak := make([]float64, n)
		for _, r := range bl.rows {
			for i, v := range r.values {
				if i < n && !math.IsNaN(v) {
					peak[i] = max(peak[i], v)
				}
			}
		}
		for _, r := range bl.rows {
			mid := y + rowHeight/2.0
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" fill="#111827" dominant-baseline="middle">%s</text>`+"\n",
				chartMargin+6, mid, esc(r.label))
			for i := range n {
				x := px(i)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d1d5db"/>`+"\n", x, y, x, y+rowHeight)
				v := math.NaN()
				if i < len(r.values) {
					v = r.values[i]
				}
				text := ""
				if i < len(r.texts) {
					text = r.texts[i]
				}
				if math.IsNaN(v) {
					fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" font-style="italic" fill="#9ca3af" dominant-baseline="middle">%s</text>`+"\n",
						x+4, mid, esc(cmp.Or(text, "no result")))
					continue
				}
				w := 0.0
				if peak[i] > 0 {
					w = v / peak[i] * barMax
				}
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`+"\n",
					x, mid-barHeight/2.0, w, barHeight, colorOf(r.label), esc(r.label), esc(text))
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#111827" dominant-baseline="middle">%s</text>`+"\n",
					x+w+4, mid, esc(text))
			}
			y += rowHeight
		}
		y += blockGap
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// inGroup returns the scenarios of one group, in run order.
func (r *Report) inGroup(group string) []ScenarioResult {
	var scs []ScenarioResult
	for _, sc := range r.Scenarios {
		if sc.Group == group {
			scs = append(scs, sc)
		}
	}
	return scs
}

// charts builds one chart per scenario group that has results.
func (r *Report) charts() map[string]chart {
	out := map[string]chart{}
	for _, g := range groups {
		scs := r.inGroup(g.Name)
		if len(scs) == 0 {
			continue
		}
		c := chart{title: g.Title}
		if g.Name == "idle" {
			c.note = "Server memory with the connections open and idle; lower is better. × = ratio to stdlib."
			c.panels = []string{"KiB per idle connection", "RSS held, MiB"}
		} else {
			c.note = "Bars are scaled within each scenario. × = ratio to stdlib. p99 is closed-loop round-trip latency; lower is better."
			c.panels = []string{"requests per second", "requests per server CPU-second", "p99 latency, µs"}
		}
		for _, sc := range scs {
			bl := chartBlock{title: sc.Title}
			if sc.Kind == kindIdle {
				bl.title = fmt.Sprintf("%s: %s held", sc.Title, num(float64(sc.Conns)))
			}
			for _, sv := range sc.Servers {
				row := chartRow{label: sv.Server}
				rr := sv.ratios()
				vs := func(x float64) string {
					if sv.Server == baseline || x == 0 {
						return ""
					}
					return fmt.Sprintf("  (%.2f×)", x)
				}
				switch {
				case sv.Idle != nil:
					row.values = []float64{sv.Idle.KiBPerConn, sv.Idle.RSSHeldKiB / 1024}
					row.texts = []string{fmt.Sprintf("%.2f KiB", sv.Idle.KiBPerConn) + vs(rr.KiBPerConn), fmt.Sprintf("%.1f MiB", sv.Idle.RSSHeldKiB/1024)}
				case sv.Load != nil:
					l := sv.Load
					row.values = []float64{l.RPS, l.ReqPerServerCPUS, l.P99}
					row.texts = []string{num(l.RPS) + vs(rr.RPS), num(l.ReqPerServerCPUS) + vs(rr.ReqPerCPU), lat(l.P99)}
				default:
					row.values = []float64{math.NaN(), math.NaN(), math.NaN()}
					row.texts = []string{"failed", "failed", "failed"}
				}
				bl.rows = append(bl.rows, row)
			}
			c.blocks = append(c.blocks, bl)
		}
		out[g.Name] = c
	}
	return out
}
