package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// row is one line of the result table.
type row struct {
	name        string
	idem, river float64
	unit        string // "jobs/s" (higher is better) or "ms" (lower is better)
	// target is the target ratio idem/River (0: none).
	target float64
}

// printTable prints rows as a Markdown table.
func printTable(w io.Writer, rows []row) {
	targets := slices.ContainsFunc(rows, func(r row) bool { return r.target > 0 })
	if targets {
		fmt.Fprintln(w, "| scenario | idem | River | ratio (idem/River) | issue 14 target |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	} else {
		fmt.Fprintln(w, "| scenario | idem | River | ratio (idem/River) |")
		fmt.Fprintln(w, "|---|---:|---:|---:|")
	}
	for _, r := range rows {
		ratio := "n/a"
		if r.river > 0 {
			ratio = fmt.Sprintf("%.2f×", r.idem/r.river)
		}
		line := fmt.Sprintf("| %s | %s | %s | %s |", r.name, format(r.idem, r.unit), format(r.river, r.unit), ratio)
		if targets {
			t := ""
			if r.target > 0 {
				met := "not met"
				if r.river > 0 && r.idem/r.river >= r.target {
					met = "met"
				}
				t = fmt.Sprintf("≥ %.1f×: %s", r.target, met)
			}
			line += " " + t + " |"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w, "\nratio: above 1 is better for idem on jobs/s rows, below 1 on ms (latency) and µs (CPU per job) rows.")
}

func format(v float64, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "µs":
		return fmt.Sprintf("%.0f µs", v)
	}
	return strings.TrimSpace(count(int(v + 0.5)))
}
