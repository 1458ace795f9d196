package breaker

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// IsStoreFailure reports whether err says the store (Redis) is unhealthy or
// unreachable, as opposed to an answer from a healthy store. It is the default
// [Config.IsFailure].
//
// It returns true for:
//   - io.EOF and io.ErrUnexpectedEOF (the connection was closed under us);
//   - any dial error (connection refused, unreachable host, dial timeout),
//     unless it was caused by a cancelled context;
//   - connection refused, reset or aborted, broken pipe, host or network
//     unreachable;
//   - go-redis's pool timeout (every connection is stuck on a slow store);
//   - a timeout [net.Error] (a read or write deadline, such as go-redis's
//     ReadTimeout, expired);
//   - Redis error replies starting with LOADING, READONLY, MASTERDOWN, BUSY,
//     OOM, CLUSTERDOWN or TRYAGAIN (also behind KVRocks's "ERR " prefix), and
//     "ERR max number of clients reached".
//
// It returns false for nil, for redis.Nil and every other Redis error reply
// (the store answered), for any other error (such as a "denied" answer), and for
// context.Canceled and context.DeadlineExceeded: from an error alone it cannot
// tell whose deadline expired. [Do] makes that distinction from the contexts it
// holds and counts an expiry of its own per-call timeout as a failure; code that
// calls IsStoreFailure directly should check its own ctx.Err() first.
func IsStoreFailure(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		// A dial that timed out matches context.DeadlineExceeded (net's
		// errTimeout), so this check comes before the context checks.
		return !errors.Is(err, context.Canceled)
	}
	for _, errno := range connErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	if inChain(err, func(e error) bool { return e.Error() == poolTimeoutText }) {
		return true
	}
	var rerr redisError
	if errors.As(err, &rerr) {
		return isFailureReply(rerr.Error())
	}
	// context.DeadlineExceeded has a Timeout method too; it is not ours to judge.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return false
}

// redisError is go-redis's redis.Error (an error reply from the server),
// declared by its method set so that breaker, and everything built on it,
// links no Redis client: go-redis's own reply errors satisfy it.
type redisError interface {
	error
	RedisError()
}

// poolTimeoutText is the text of go-redis's redis.ErrPoolTimeout, a plain
// errors.New value that can only be matched without importing go-redis by
// its text (classify_test.go checks it against go-redis's).
const poolTimeoutText = "redis: connection pool timeout"

// inChain reports whether match holds for err or any error it wraps, through
// Unwrap() error and Unwrap() []error alike, as errors.Is walks.
func inChain(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if inChain(e, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

var connErrnos = [...]error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
	syscall.EPIPE, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
}

// failureReplies are the Redis error codes that mean the server can't serve
// now. Each is matched as a whole word: "BUSY" must not match "BUSYGROUP" or
// "BUSYKEY", which are answers about the data.
var failureReplies = [...]string{
	"LOADING", "READONLY", "MASTERDOWN", "BUSY", "OOM", "CLUSTERDOWN", "TRYAGAIN",
}

func isFailureReply(msg string) bool {
	msg = strings.TrimPrefix(msg, "ERR ") // KVRocks prefixes codes with ERR
	if strings.HasPrefix(msg, "max number of clients reached") {
		return true
	}
	for _, code := range failureReplies {
		if rest, ok := strings.CutPrefix(msg, code); ok && (rest == "" || rest[0] == ' ') {
			return true
		}
	}
	return false
}
