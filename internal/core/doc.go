// Package core defines what package floodgate exports: the gate contract, the
// Observer and its Event, RejectError and the vocabulary's words. The types
// live here, in a package that imports only the standard library, so that
// the leaves that must import nothing else (semaphore and shaper) can
// implement the contract and report events; package floodgate re-exports
// every one of them under the same name (type aliases and constants), and
// that is the name users and the other packages use. Read the docs there.
package core
