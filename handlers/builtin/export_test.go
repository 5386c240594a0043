package builtin

// NoteSessions returns how many sessions hold demo notes, in every store.
func NoteSessions() int64 { return noteSessions.Load() }
