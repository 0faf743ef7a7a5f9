// Package initgc keeps the garbage collector off while charter's packages
// initialise, and charter's main package turns it back on (Done) from its
// own init, which Go runs after every other package's.
//
// The binary links some 800 packages with initialisation work (Kubernetes
// schemes, Prometheus metrics, regular expressions, CEL declarations): about
// 10 MB allocated before main, most of it kept. With the collector on, the
// runtime's 4 MB starting goal makes it collect three or four times during
// initialisation, each time marking what initialisation has built so far and
// will keep; measured on `charter version` that was about a third of the CPU
// of a run that does nothing (80 -> 54 ms), paid by every `charter test` and
// `charter apply` before it reads a file.
//
// Go initialises the packages of a program in the order of their import
// paths, each as soon as its own imports are done: this package imports
// only the runtime's, so it runs before nearly all of charter's dependencies.
package initgc

import "runtime/debug"

// percent is the collector's setting before initialisation turned it off:
// $GOGC's, or 100.
var percent = debug.SetGCPercent(-1)

// Done gives the collector back its setting. A program that imports this
// package calls it from its main package's init (or first thing in main).
// Calling it again is harmless.
func Done() { debug.SetGCPercent(percent) }
