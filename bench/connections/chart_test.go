package connbench

import (
	"fmt"
	"math"
	"strings"

	"github.com/steward-evals/steward/internal/gateway/connsim"
)

// chart draws a run as an SVG: above, the provider's limit, the rate it
// admitted and its 429s (requests a second); below, the calls in flight and
// the connection limit. Steward in colour, the Inspect-style policy's
// admitted rate and calls in flight in grey for comparison. Points are
// 5-second averages.
func chart(title string, s connsim.Scenario, st, in connsim.Result) string {
	const (
		w, h           = 900, 580
		left, right    = 70, 20
		top1, bottom1  = 50, 270
		top2, bottom2  = 320, 520
		avg            = 5
		grey, greyDash = "#9a9a9a", "6 4"
	)
	n := len(st.Series)
	end := float64(n) // seconds
	x := func(t float64) float64 { return left + (w-left-right)*t/end }
	type series struct{ t, v []float64 }
	mean := func(r connsim.Result, f func(connsim.Point) float64) series {
		var out series
		for i := 0; i+avg <= len(r.Series); i += avg {
			sum := 0.0
			for _, p := range r.Series[i : i+avg] {
				sum += f(p)
			}
			out.t = append(out.t, float64(i+avg/2))
			out.v = append(out.v, sum/avg)
		}
		return out
	}
	admitted := func(p connsim.Point) float64 { return float64(p.Admitted) }
	limitRate := func(p connsim.Point) float64 { return p.LimitRate }
	r429 := func(p connsim.Point) float64 { return float64(p.RateLimited) }
	inflight := func(p connsim.Point) float64 { return float64(p.InFlight) }
	connLimit := func(p connsim.Point) float64 { return float64(p.ConnLimit) }

	stAdm, inAdm, lim, st429 := mean(st, admitted), mean(in, admitted), mean(st, limitRate), mean(st, r429)
	stIn, stLim, inIn := mean(st, inflight), mean(st, connLimit), mean(in, inflight)
	maxOf := func(ss ...series) float64 {
		m := 0.0
		for _, s := range ss {
			for _, v := range s.v {
				m = math.Max(m, v)
			}
		}
		return niceCeil(m * 1.1)
	}
	rMax := maxOf(stAdm, inAdm, lim)
	cMax := maxOf(stIn, stLim, inIn)
	y1 := func(v float64) float64 { return bottom1 - (bottom1-top1)*math.Min(v, rMax)/rMax }
	y2 := func(v float64) float64 { return bottom2 - (bottom2-top2)*math.Min(v, cMax)/cMax }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", left, esc(title))
	line := func(s series, y func(float64) float64, color, dash string, width float64) {
		var pts []string
		for i := range s.t {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.t[i]), y(s.v[i])))
		}
		d := ""
		if dash != "" {
			d = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f"%s points="%s"/>`+"\n", color, width, d, strings.Join(pts, " "))
	}
	axes := func(top, bottom float64, max float64, y func(float64) float64, label string) {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="black"/>`+"\n", left, top, left, bottom)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="black"/>`+"\n", left, bottom, w-right, bottom)
		for i := 0; i <= 4; i++ {
			v := max * float64(i) / 4
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e6e6"/>`+"\n", left+1, y(v), w-right, y(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, trim(v))
		}
		fmt.Fprintf(&b, `<text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">%s</text>`+"\n", (top+bottom)/2, (top+bottom)/2, label)
		step := niceCeil(end / 60 / 8) // minutes between ticks
		for m := 0.0; m*60 <= end; m += step {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x(m*60), bottom+16, trim(m)+" min")
		}
	}
	axes(top1, bottom1, rMax, y1, "requests / s")
	axes(top2, bottom2, cMax, y2, "calls")
	// The halving.
	if s.HalveAt > 0 {
		hx := x(s.HalveAt.Seconds())
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#444" stroke-dasharray="2 3"/>`+"\n", hx, top1, hx, bottom2)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">limit halved</text>`+"\n", hx+4, top1+12)
	}
	line(inAdm, y1, grey, greyDash, 1.5)
	line(lim, y1, "black", "", 2)
	line(stAdm, y1, "#1f6fd1", "", 2)
	line(st429, y1, "#d62728", "", 1.5)
	line(inIn, y2, grey, greyDash, 1.5)
	line(stLim, y2, "#ff8c00", "", 2)
	line(stIn, y2, "#1f6fd1", "", 2)
	legend := []struct{ color, dash, text string }{
		{"black", "", "provider's limit"},
		{"#1f6fd1", "", "Steward: admitted / in flight"},
		{"#ff8c00", "", "Steward: connection limit"},
		{"#d62728", "", "Steward: 429s / s"},
		{grey, greyDash, "Inspect-style: admitted / in flight"},
	}
	lx, ly := float64(left), h-26
	for i, l := range legend {
		if i == 3 {
			lx, ly = float64(left), h-8
		}
		d := ""
		if l.dash != "" {
			d = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
		}
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%d" x2="%.0f" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly-4, lx+22, ly-4, l.color, d)
		fmt.Fprintf(&b, `<text x="%.0f" y="%d">%s</text>`+"\n", lx+27, ly, esc(l.text))
		lx += 27 + 7*float64(len(l.text)) + 24
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to a round multiple of a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
