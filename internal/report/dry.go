package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/olekukonko/tablewriter"

	"github.com/steward-evals/steward/internal/forecast"
)

// Dry is a launch's plan before anything runs (`launch --dry`): the PLAN
// line, the forecast, each task's row and each attempt's action. It is
// data first, as the reports are; WriteDry and WriteDryJSON render it.
type Dry struct {
	Plan     string
	Forecast *forecast.Forecast
	Tasks    []DryTask
	// Attempts in discovery order.
	Attempts []DryAttempt
}

// DryTask is one task of a Dry plan: where its sandboxes come from, the
// limit on its samples ("ramp", "≤N", "fixed", …), and its attempts' seqs
// in dispatch order (lanes in their stable member order).
type DryTask struct {
	Name, Provider, Limit string
	Order                 []int
}

// DryAttempt is one attempt of a Dry plan: its action (run, carry, skip)
// and why.
type DryAttempt struct {
	Seq     int    `json:"-"`
	Task    string `json:"task"`
	Sample  string `json:"sample"`
	Attempt int    `json:"attempt"`
	Action  string `json:"action"`
	Reason  string `json:"reason"`
	Lane    string `json:"lane,omitempty"`
}

// WriteDry prints the PLAN line, the forecast, a per-task table and every
// attempt, task by task in dispatch order, one plain aligned line each
// (thousands of rows: a boxed table costs more than the whole plan).
func WriteDry(w io.Writer, d Dry) error {
	fmt.Fprintln(w, PlanLine(d.Plan))
	fmt.Fprintln(w, d.Forecast.String())
	for _, n := range d.Forecast.Notes {
		fmt.Fprintln(w, "  "+n)
	}
	bySeq := make(map[int]DryAttempt, len(d.Attempts))
	for _, a := range d.Attempts {
		bySeq[a.Seq] = a
	}
	tw := tablewriter.NewTable(w)
	tw.Header("task", "provider", "samples", "attempts", "run", "carry", "limit", "lanes")
	for _, t := range d.Tasks {
		// carry counts every attempt that does not run (carried results
		// and early-exit skips of samples whose pass is carried).
		samples, lanes := map[string]bool{}, map[string]bool{}
		run := 0
		for _, seq := range t.Order {
			a := bySeq[seq]
			samples[a.Sample] = true
			if a.Lane != "" {
				lanes[a.Lane] = true
			}
			if a.Action == "run" {
				run++
			}
		}
		_ = tw.Append([]string{t.Name, t.Provider, fmt.Sprint(len(samples)), fmt.Sprint(len(t.Order)), fmt.Sprint(run), fmt.Sprint(len(t.Order) - run), t.Limit, fmt.Sprint(len(lanes))})
	}
	if err := tw.Render(); err != nil {
		return err
	}
	return writeDryAttempts(w, d, bySeq)
}

func writeDryAttempts(w io.Writer, d Dry, bySeq map[int]DryAttempt) error {
	bw := bufio.NewWriter(w)
	at := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(at, "#\ttask\tsample\tattempt\taction\treason\tlane")
	n := 0
	for _, t := range d.Tasks {
		name := Plain(t.Name, 60)
		for _, seq := range t.Order {
			a := bySeq[seq]
			n++
			lane := a.Lane
			if lane != "" {
				lane = Plain(strings.TrimPrefix(lane, t.Name+"/"), 60)
			}
			fmt.Fprintf(at, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", n, name, Plain(a.Sample, 60), a.Attempt, a.Action, Plain(a.Reason, 200), lane)
		}
	}
	if err := at.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteDryJSON is `launch --dry --json`: the PLAN line, the forecast and
// every attempt with its action, in discovery order.
func WriteDryJSON(w io.Writer, d Dry) error {
	out := struct {
		Plan     string             `json:"plan"`
		Forecast *forecast.Forecast `json:"forecast"`
		Attempts []DryAttempt       `json:"attempts"`
	}{Plan: d.Plan, Forecast: d.Forecast, Attempts: d.Attempts}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
