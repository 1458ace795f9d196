package adaptiveredis

import (
	_ "embed"

	"github.com/floodgate-go/floodgate/internal/redisscript"
)

// The two scripts (see the header of each file for its contract). They are
// sent with EVALSHA, then EVAL on NOSCRIPT (redisscript, through go-redis's
// Script.Run: their replies mix integers and strings).

//go:embed lua/flush.lua
var flushLua string

//go:embed lua/close.lua
var closeLua string

var (
	flushScript = redisscript.New(flushLua)
	closeScript = redisscript.New(closeLua)
)
