// Package recipes holds the runnable recipes of docs/recipes: one example
// test per seed system, reproducing the seed's own scenario with its own
// defaults. `go test ./docs/recipes` runs them (CI does).
package recipes
