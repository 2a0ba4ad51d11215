package main

import (
	"fmt"
	"io"
	"strings"
)

// row is one line of the result table.
type row struct {
	name        string
	idem, river float64
	unit        string // "jobs/s" (higher is better) or "ms" (lower is better)
}

// printTable prints rows as a Markdown table.
func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | idem | River | ratio (idem/River) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, r := range rows {
		ratio := "n/a"
		if r.river > 0 {
			ratio = fmt.Sprintf("%.2f×", r.idem/r.river)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.name, format(r.idem, r.unit), format(r.river, r.unit), ratio)
	}
	fmt.Fprintln(w, "\nratio: above 1 is better for idem on jobs/s rows, below 1 on ms (latency) rows.")
}

func format(v float64, unit string) string {
	if unit == "ms" {
		return fmt.Sprintf("%.2f ms", v)
	}
	return strings.TrimSpace(count(int(v + 0.5)))
}
