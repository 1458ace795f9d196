package distsem

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The three scripts share a prelude (common.lua: key layout, TIME, reaping, the
// hand-off loop). Each script is the prelude followed by its own file; the
// resulting source is what Redis caches (EVALSHA, then EVAL on NOSCRIPT).

//go:embed lua/common.lua
var commonLua string

//go:embed lua/acquire.lua
var acquireLua string

//go:embed lua/renew.lua
var renewLua string

//go:embed lua/release.lua
var releaseLua string

var (
	acquireScript = redis.NewScript(commonLua + acquireLua)
	renewScript   = redis.NewScript(commonLua + renewLua)
	releaseScript = redis.NewScript(commonLua + releaseLua)
)

// Status codes returned by the scripts (see the header of each .lua file).
const (
	stGranted  = 1
	stQueued   = 0
	stBusy     = 2
	stTomb     = -1
	stTooHeavy = -2

	stRenewed   = 1
	stReadopted = 2
	stLost      = 0
)
