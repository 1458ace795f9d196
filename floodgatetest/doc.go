// Package floodgatetest is a kit for testing a floodgate configuration in
// your own tests: a fault proxy to put between your client and its Redis (or
// any TCP server).
//
// # Faults
//
// A [Proxy] listens on a free loopback port in front of an address and
// forwards to it. [Proxy.Freeze] stops the bytes (a stalled server),
// [Proxy.Delay] slows them, [Proxy.Drop] closes every connection and refuses
// new ones, [Proxy.Reset] resets the open connections once, and [Proxy.Heal]
// takes every fault away. No root and no signal is needed. To partition one
// client from the server, give it a Proxy of its own and freeze or drop that.
package floodgatetest
