// Package trampoline is the first thing a confined command runs: the
// server's own executable, started under the name Name, confines itself
// with the ruleset the server built and executes the command (see package
// sandbox). It imports nothing but the runtime's closest packages, so
// that Go initializes it before almost every other package of the binary:
// the trampoline costs a few hundred microseconds, not the whole binary's
// start.
package trampoline
