package bench

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
)

// glyphs is a 3x5 bitmap font: five rows of three pixels, '#' set. Letters
// are upper case only; Chart upper-cases its labels.
var glyphs = map[rune][5]string{
	'A': {".#.", "#.#", "###", "#.#", "#.#"}, 'B': {"##.", "#.#", "##.", "#.#", "##."},
	'C': {".##", "#..", "#..", "#..", ".##"}, 'D': {"##.", "#.#", "#.#", "#.#", "##."},
	'E': {"###", "#..", "##.", "#..", "###"}, 'F': {"###", "#..", "##.", "#..", "#.."},
	'G': {".##", "#..", "#.#", "#.#", ".##"}, 'H': {"#.#", "#.#", "###", "#.#", "#.#"},
	'I': {"###", ".#.", ".#.", ".#.", "###"}, 'J': {"..#", "..#", "..#", "#.#", ".#."},
	'K': {"#.#", "#.#", "##.", "#.#", "#.#"}, 'L': {"#..", "#..", "#..", "#..", "###"},
	'M': {"#.#", "###", "###", "#.#", "#.#"}, 'N': {"##.", "#.#", "#.#", "#.#", "#.#"},
	'O': {".#.", "#.#", "#.#", "#.#", ".#."}, 'P': {"##.", "#.#", "##.", "#..", "#.."},
	'Q': {".#.", "#.#", "#.#", "##.", ".##"}, 'R': {"##.", "#.#", "##.", "#.#", "#.#"},
	'S': {".##", "#..", ".#.", "..#", "##."}, 'T': {"###", ".#.", ".#.", ".#.", ".#."},
	'U': {"#.#", "#.#", "#.#", "#.#", "###"}, 'V': {"#.#", "#.#", "#.#", "#.#", ".#."},
	'W': {"#.#", "#.#", "###", "###", "#.#"}, 'X': {"#.#", "#.#", ".#.", "#.#", "#.#"},
	'Y': {"#.#", "#.#", ".#.", ".#.", ".#."}, 'Z': {"###", "..#", ".#.", "#..", "###"},
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"##.", "..#", ".#.", "#..", "###"}, '3': {"##.", "..#", ".#.", "..#", "##."},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "##.", "..#", "##."},
	'6': {".##", "#..", "###", "#.#", "###"}, '7': {"###", "..#", ".#.", ".#.", ".#."},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "##."},
	'.': {"...", "...", "...", "...", ".#."}, '/': {"..#", "..#", ".#.", "#..", "#.."},
	'-': {"...", "...", "###", "...", "..."}, ':': {"...", ".#.", "...", ".#.", "..."},
	'(': {".#.", "#..", "#..", "#..", ".#."}, ')': {".#.", "..#", "..#", "..#", ".#."},
	'=': {"...", "###", "...", "###", "..."}, ' ': {"...", "...", "...", "...", "..."},
}

// chart geometry, in pixels.
const (
	fontScale  = 3
	charW      = 4 * fontScale // 3 pixels + 1 space
	charH      = 5 * fontScale
	chartW     = 900
	marginX    = 20
	labelW     = 10 * charW
	barH       = 36
	rowGap     = 18
	titleH     = 3 * charH
	valueSpace = 22 * charW
)

// drawText draws s (upper-cased; unknown runes become blanks) at (x, y).
func drawText(img *image.RGBA, x, y int, s string, c color.Color) {
	for _, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if ok {
			for row := range 5 {
				for col := range 3 {
					if g[row][col] != '#' {
						continue
					}
					for dy := range fontScale {
						for dx := range fontScale {
							img.Set(x+col*fontScale+dx, y+row*fontScale+dy, c)
						}
					}
				}
			}
		}
		x += charW
	}
}

func fillRect(img *image.RGBA, r image.Rectangle, c color.Color) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.Set(x, y, c)
		}
	}
}

var barColors = map[string]color.RGBA{
	ContenderRaw:     {0x88, 0x88, 0x88, 0xff},
	ContenderKmirror: {0x1f, 0x77, 0xb4, 0xff},
	ContenderSarama:  {0xff, 0x7f, 0x0e, 0xff},
	ContenderMM2:     {0xd6, 0x27, 0x28, 0xff},
}

// panel is one bar group of the chart.
type panel struct {
	title string
	value func(Result) float64
	unit  string
}

// Chart draws two horizontal bar charts as one PNG: each contender's MB/s,
// and its CPU seconds per GB, with the contender's name left of its bar and
// the value right of it.
func Chart(rep *Report) ([]byte, error) {
	panels := []panel{
		{fmt.Sprintf("MB/S OF SOURCE BYTES (HIGHER IS BETTER)  %.0f MIB LZ4  %d PARTITIONS", mib(rep.SourceBytes), rep.Partitions),
			func(r Result) float64 { return r.MBps }, "%.1f MB/S"},
		{"CPU SECONDS PER GB (LOWER IS BETTER)", func(r Result) float64 { return r.CPUSecondsPerGB }, "%.2f S/GB"},
	}
	n := len(rep.Results)
	panelH := titleH + n*(barH+rowGap) + rowGap
	img := image.NewRGBA(image.Rect(0, 0, chartW, panelH*len(panels)))
	fillRect(img, img.Bounds(), color.White)
	for i, p := range panels {
		drawPanel(img, i*panelH, rep.Results, p)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("bench: chart: %w", err)
	}
	return buf.Bytes(), nil
}

func drawPanel(img *image.RGBA, top int, results []Result, p panel) {
	rows := make([]chartRow, len(results))
	for i, r := range results {
		c, ok := barColors[r.Contender]
		if !ok {
			c = color.RGBA{0x44, 0x44, 0x44, 0xff}
		}
		rows[i] = chartRow{label: r.Contender, color: c, value: p.value(r), failed: r.Error != ""}
	}
	drawRows(img, top, p.title, p.unit, rows)
}

// chartRow is one bar of a panel.
type chartRow struct {
	label  string
	color  color.RGBA
	value  float64
	failed bool
}

// drawRows draws a titled panel of horizontal bars scaled to the largest
// value, the label left of each bar and its value (unit format) right of it.
func drawRows(img *image.RGBA, top int, title, unit string, rows []chartRow) {
	black := color.RGBA{0, 0, 0, 0xff}
	drawText(img, marginX, top+charH, title, black)
	var most float64
	for _, r := range rows {
		if !r.failed {
			most = max(most, r.value)
		}
	}
	barMax := chartW - marginX*2 - labelW - valueSpace
	for i, r := range rows {
		y := top + titleH + i*(barH+rowGap)
		drawText(img, marginX, y+(barH-charH)/2, r.label, black)
		x0 := marginX + labelW
		w := 0
		if most > 0 && !r.failed {
			w = int(float64(barMax) * r.value / most)
		}
		fillRect(img, image.Rect(x0, y, x0+max(w, 1), y+barH), r.color)
		label := fmt.Sprintf(unit, r.value)
		if r.failed {
			label = "FAILED"
		}
		drawText(img, x0+w+charW, y+(barH-charH)/2, label, black)
	}
}
