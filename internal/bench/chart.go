package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// chartBar is one bar of the bench chart.
type chartBar struct {
	label string
	value float64
	base  bool // a baseline (pgbench, River), drawn in grey
}

// writeChart draws horizontal bars, one per measure, scaled to the
// largest, each labelled with its value: our rates beside the machine's.
func writeChart(path, title string, bars []chartBar) error {
	const w, rowH, left, top = 900, 34, 330, 44
	h := top + rowH*len(bars) + 20
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bg := color.RGBA{0x0f, 0x14, 0x19, 0xff}
	draw.Draw(img, img.Bounds(), &image.Uniform{bg}, image.Point{}, draw.Src)
	text := func(x, y int, s string, c color.Color) {
		d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	fg, muted := color.RGBA{0xd7, 0xde, 0xe7, 0xff}, color.RGBA{0x7b, 0x8a, 0x9c, 0xff}
	text(16, 24, title, fg)
	maxV := 1.0
	for _, b := range bars {
		maxV = max(maxV, b.value)
	}
	for i, b := range bars {
		y := top + i*rowH
		text(16, y+17, b.label, muted)
		length := int(float64(w-left-120) * b.value / maxV)
		c := color.RGBA{0x8b, 0x7b, 0xff, 0xff}
		if b.base {
			c = color.RGBA{0x4a, 0x55, 0x66, 0xff}
		}
		draw.Draw(img, image.Rect(left, y+4, left+max(length, 1), y+rowH-8), &image.Uniform{c}, image.Point{}, draw.Src)
		text(left+length+8, y+17, fmt.Sprintf("%.0f /s", b.value), fg)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
