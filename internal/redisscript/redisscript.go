// Package redisscript runs Lua scripts on Redis with commands the caller
// builds, so that a call boxes only the arguments that vary. A [Script] carries
// its digest and its source, each boxed once: it sends EVALSHA and, when Redis
// answers NOSCRIPT (its script cache was flushed, or it restarted or failed
// over), sends the same keys and arguments again as EVAL of the source, which
// caches the script, as go-redis's Script.Run does. Replies are read as arrays
// of integers (redis.IntSliceCmd), straight into []int64, or, for a script
// made with [NewPacked], as a string of little-endian 64-bit integers
// (struct.pack('<i8...') in Lua), which costs Redis less to send than an
// array. Used by shaper's meters and distsem's semaphores.
package redisscript

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A Script is a Lua script with its SHA-1 digest and its source, each boxed
// once for the commands built by [Script.Cmd]. The embedded *redis.Script
// serves go-redis's own calls (Hash, Load, Run) where building the command by
// hand does not pay. A Script is safe for concurrent use; use [New].
type Script struct {
	*redis.Script
	src    string
	sha    any // the digest, boxed
	srcArg any // the source, boxed
	packed bool
}

var (
	evalshaName any = "evalsha"
	evalName    any = "eval"
)

// New returns the Script of the Lua source src.
func New(src string) *Script {
	rs := redis.NewScript(src)
	return &Script{Script: rs, src: src, sha: rs.Hash(), srcArg: src}
}

// NewPacked returns the Script of the Lua source src, whose reply is a string
// of little-endian 64-bit integers (struct.pack('<i8i8...') in Lua): Redis
// returns a string for less than an array (it checks an array for half a
// dozen special fields before it sends it). [Script.Ints] reads it as the
// same []int64 as an array.
func NewPacked(src string) *Script {
	s := New(src)
	s.packed = true
	return s
}

// Source returns the script's Lua source.
func (s *Script) Source() string { return s.src }

// Cmd returns an EVALSHA command of s with args: it sets args[0] and args[1]
// to "evalsha" and the digest; the caller has set args[2] to the number of
// keys, at least 1, then the keys and the script's ARGV. The first key (at 3)
// routes the command on Cluster and Ring. The command reads the script's
// reply (an *redis.IntSliceCmd, or an *redis.StringCmd for a packed script).
// Send it with Process, then read it with [Script.Ints]. go-redis reads args
// until Process returns; args must not change until then.
func (s *Script) Cmd(ctx context.Context, args []any) redis.Cmder {
	args[0], args[1] = evalshaName, s.sha
	return s.cmd(ctx, args)
}

func (s *Script) cmd(ctx context.Context, args []any) redis.Cmder {
	if s.packed {
		cmd := redis.NewStringCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		return cmd
	}
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// Ints returns the reply of cmd, a command of s (from [Script.Cmd]) that has
// been sent. If Redis answered NOSCRIPT, Ints sends the same keys and
// arguments again on c as EVAL of the source (writing args[0] and args[1] of
// cmd's args), and returns that reply. A reply that is not an array of
// integers (for a packed script: a string of 8-byte integers) is an error
// (go-redis reads a nil array element as 0).
func (s *Script) Ints(ctx context.Context, c redis.UniversalClient, cmd redis.Cmder) ([]int64, error) {
	v, err := s.ints(cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // HasErrorPrefix allocates: errors only
		args := cmd.Args()
		args[0], args[1] = evalName, s.srcArg
		cmd = s.cmd(ctx, args)
		_ = c.Process(ctx, cmd)
		v, err = s.ints(cmd)
	}
	return v, err
}

func (s *Script) ints(cmd redis.Cmder) ([]int64, error) {
	switch cmd := cmd.(type) {
	case *redis.IntSliceCmd:
		return cmd.Result()
	case *redis.StringCmd:
		b, err := cmd.Result()
		if err != nil {
			return nil, err
		}
		if len(b)%8 != 0 {
			return nil, fmt.Errorf("redisscript: unexpected reply of %d bytes", len(b))
		}
		v := make([]int64, len(b)/8)
		for i := range v {
			var u uint64
			for j := 8*i + 7; j >= 8*i; j-- {
				u = u<<8 | uint64(b[j])
			}
			v[i] = int64(u)
		}
		return v, nil
	}
	return nil, fmt.Errorf("redisscript: unexpected command %T", cmd)
}

// EvalInts sends the command of s with args (see [Script.Cmd]) on c and
// returns its reply (see [Script.Ints]): one round trip, or two if Redis did
// not have the script cached. When it is cached, EvalInts allocates no more
// than go-redis does for the command (an IntSliceCmd and its reply), and for
// a packed script one []int64 more.
func (s *Script) EvalInts(ctx context.Context, c redis.UniversalClient, args []any) ([]int64, error) {
	cmd := s.Cmd(ctx, args)
	_ = c.Process(ctx, cmd)
	return s.Ints(ctx, c, cmd)
}
