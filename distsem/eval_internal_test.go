package distsem

import (
	"context"

	"github.com/floodgate-go/floodgate/internal/redisscript"
)

// eval runs sc with tok and extra (see command) bounded by the breaker's
// CallTimeout, without the breaker (see run and call): the script tests call
// the scripts directly.
func (s *Semaphore) eval(ctx context.Context, sc *redisscript.Script, tok any, extra ...any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	return run(ctx, s.client, sc, s.command(tok, extra...))
}
