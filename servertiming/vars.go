package servertiming

// The Caddy variables (caddyhttp.SetVar) through which other edgekit
// modules report their time without importing this package. The handler
// sets VarOn before calling the handlers inside it; a module times its work
// only when VarOn is true, so without server_timing it pays one map lookup.
// docs/server-timing.md documents the contract; ratelimit and substitute
// spell the names out.
const (
	// VarOn is true while a server_timing handler times the request.
	VarOn = "server_timing"
	// VarThrottle is the time.Duration throttle spent deciding the request
	// in its zones (its store's answers), set before it passes the request
	// on or rejects it.
	VarThrottle = "server_timing.throttle"
	// VarSubstitute is the time.Duration substitute spent rewriting the
	// body, set when the body ends.
	VarSubstitute = "server_timing.substitute"
)
