// Package floodgate holds the few things every floodgate package shares: the
// gate contract ([Gate], [KeyedGate], [Held]) that every concurrency gate
// implements and every consumer takes, the one observation hook
// ([Observer], [Event]), the one refusal type ([RejectError]) and the words
// ([Reason], [Source], [Component]) that errors, Stats, logs and metrics use.
// It imports only the standard library and internal/core, where the types are
// defined (see floodgate.go for why).
//
// The gates are semaphore.Weighted and semaphore.Keyed (in one process) and
// distsem.Semaphore and distsem.Keyed (across a fleet, through Redis); the
// consumers are bulkhead's layers, bulkhead.Workers and bulkheadpgx's query
// classes. Any gate works in any consumer.
//
// To test a configuration of these in your own tests (a fault proxy between
// your client and Redis, a private redis-server, invariant checks over a
// fleet of your pods), see floodgatetest.
package floodgate
