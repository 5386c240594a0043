package engine

import (
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// The method table: every request method the engine serves, one row
// each, and what serves it in each revision. Every routing decision reads
// it (route, fastDirect, answersItself, handleStateless, dispatch), and so
// do the metrics labels (MethodIndex, MethodLabel: package admin) and
// Streamable HTTP's Mcp-Name checks (NameParam). A method that is not in
// the table is answered -32601 in every revision, counted "other", and
// has no Mcp-Name.
//
// A row names what serves the method with ops, each the case of one
// switch per path that calls the function (fastDirect, handleStateless,
// dispatch): a function value called through the table would make every
// pointer it is passed escape to the heap, and the hot paths allocate
// nothing.
var methods = [...]method{
	iPing:                   {name: mcp.MethodPing, since: mcp.Version20241105, early: true, now: opPing},
	iInitialize:             {name: mcp.MethodInitialize, since: mcp.Version20241105, early: true, now: opInitialize},
	iToolsList:              {name: mcp.MethodToolsList, since: mcp.Version20241105, stateless: true, now: opListPage, statelessNow: opListPage, list: handlers.ListNameTools},
	iToolsCall:              {name: mcp.MethodToolsCall, since: mcp.Version20241105, stateless: true, now: opInlineTool, statelessNow: opInlineTool, pool: opCallTool, nameParam: "name"},
	iResourcesList:          {name: mcp.MethodResourcesList, since: mcp.Version20241105, stateless: true, now: opListPage, statelessNow: opListPage, list: handlers.ListNameResources},
	iResourcesTemplatesList: {name: mcp.MethodResourcesTemplatesList, since: mcp.Version20241105, stateless: true, now: opListPage, statelessNow: opListPage, list: handlers.ListNameTemplates},
	iResourcesRead:          {name: mcp.MethodResourcesRead, since: mcp.Version20241105, stateless: true, now: opStaticRead, pool: opReadResource, nameParam: "uri"},
	iResourcesSubscribe:     {name: mcp.MethodResourcesSubscribe, since: mcp.Version20241105, now: opSubscribe},
	iResourcesUnsubscribe:   {name: mcp.MethodResourcesUnsubscribe, since: mcp.Version20241105, now: opUnsubscribe},
	iPromptsList:            {name: mcp.MethodPromptsList, since: mcp.Version20241105, stateless: true, now: opListPage, statelessNow: opListPage, list: handlers.ListNamePrompts},
	iPromptsGet:             {name: mcp.MethodPromptsGet, since: mcp.Version20241105, stateless: true, pool: opGetPrompt, nameParam: "name"},
	iCompletionComplete:     {name: mcp.MethodCompletionComplete, since: mcp.Version20241105, stateless: true, pool: opComplete},
	iLoggingSetLevel:        {name: mcp.MethodLoggingSetLevel, since: mcp.Version20241105, now: opSetLevel},
	iTasksGet:               {name: mcp.MethodTasksGet, since: mcp.Version20251125, stateless: true, now: opSessionTask, statelessNow: opStatelessTask, nameParam: "taskId"},
	iTasksResult:            {name: mcp.MethodTasksResult, since: mcp.Version20251125, pool: opTasksResult},
	iTasksList:              {name: mcp.MethodTasksList, since: mcp.Version20251125, now: opSessionTask},
	iTasksCancel:            {name: mcp.MethodTasksCancel, since: mcp.Version20251125, stateless: true, now: opSessionTask, statelessNow: opStatelessTask, nameParam: "taskId"},
	iTasksUpdate:            {name: mcp.MethodTasksUpdate, stateless: true, statelessNow: opStatelessTask, nameParam: "taskId"},
	iServerDiscover:         {name: mcp.MethodServerDiscover, stateless: true, statelessNow: opDiscover},
	iSubscriptionsListen:    {name: mcp.MethodSubscriptionsListen, stateless: true, statelessNow: opListen},
}

// The rows' indexes (MethodIndex).
const (
	iPing = iota
	iInitialize
	iToolsList
	iToolsCall
	iResourcesList
	iResourcesTemplatesList
	iResourcesRead
	iResourcesSubscribe
	iResourcesUnsubscribe
	iPromptsList
	iPromptsGet
	iCompletionComplete
	iLoggingSetLevel
	iTasksGet
	iTasksResult
	iTasksList
	iTasksCancel
	iTasksUpdate
	iServerDiscover
	iSubscriptionsListen
)

// NumMethods is the number of methods in the engine's method table:
// MethodIndex returns 0 to NumMethods-1 for them, and NumMethods for any
// other.
const NumMethods = len(methods)

// method is a row of the method table.
type method struct {
	name string
	// since is the first session revision (2024-11-05 … 2025-11-25) that
	// serves the method, "" when none does; a session serves it from that
	// revision on. stateless is set when 2026-07-28 serves it.
	since     string
	stateless bool
	// early: served before initialize (and initialize itself).
	early bool
	// now answers the method at once, on the caller's goroutine, for a
	// session; statelessNow for a stateless request. pool serves it on a
	// worker of the pool when it is not answered at once. opStaticRead
	// and opInlineTool answer some requests at once and leave the others
	// to pool.
	now, statelessNow, pool op
	// list is the list opListPage answers with.
	list handlers.ListName
	// nameParam is the params member that names what a 2026-07-28
	// request acts on (a tool, a prompt, a resource's URI, a task), which
	// Streamable HTTP's Mcp-Name header mirrors; "" for none.
	nameParam string
}

// op names a function that serves a method on one path.
type op uint8

const (
	opNone op = iota
	// At once, in a session (fastDirect).
	opPing
	opInitialize
	opListPage // also stateless, with the revision's tail
	opSetLevel
	opSubscribe
	opUnsubscribe
	opSessionTask // tasks/get, tasks/list, tasks/cancel (2025-11-25)
	opStaticRead  // resources/read of a static resource
	opInlineTool  // tools/call of a NonBlocking tool; also stateless
	// At once, stateless (handleStateless).
	opDiscover
	opListen
	opStatelessTask // tasks/get, tasks/update, tasks/cancel (2026-07-28)
	// On the worker pool (dispatch).
	opCallTool
	opReadResource
	opGetPrompt
	opComplete
	opTasksResult
)

// unknown is the row of every method the table does not hold, and of a
// method that the request's revision does not serve.
var unknown = method{name: "other"}

// servedIn reports whether a session at revision version serves m.
func (m *method) servedIn(version string) bool {
	return m.since != "" && (m.since == mcp.Version20241105 || version >= m.since)
}

// sessionRow returns the row that serves m in sess: m, or unknown when
// the session's revision does not have it.
func sessionRow(sess *session.Session, m *method) *method {
	if m.since == mcp.Version20241105 || m.servedIn(sess.Version()) {
		return m // the first test spares most requests a version read
	}
	return &unknown
}

// mayBeStateless reports whether a request of method row on sess may be of
// the stateless revision, for parseStateless to decide: any request on a
// stateless session, server/discover, and any request but initialize on
// a connection that has not initialized. An initialize selects the
// session revisions for the rest of the connection (a stdio process, a
// TCP connection), as 2026-07-28's rules for dual-era servers say, so a
// session's requests pay nothing for the stateless revision.
func mayBeStateless(sess *session.Session, row *method) bool {
	return sess.Stateless() || row.statelessNow == opDiscover ||
		(row.now != opInitialize && sess.State() == session.StateNew)
}

// lookup returns the row of the method name, or &unknown: the one string
// switch of a request's path (MethodIndex), where there used to be one in
// each function that routed. TestMethodTable holds the switch to the
// table: each row's name gives its own index.
func lookup(name string) *method {
	if i := MethodIndex(name); i < NumMethods {
		return &methods[i]
	}
	return &unknown
}

// MethodIndex returns the row of method in the engine's method table, 0
// to NumMethods-1, or NumMethods for a method the engine does not serve:
// a bounded index, whatever clients send, for metrics labelled by method
// (MethodLabel). It allocates nothing.
func MethodIndex(method string) int {
	switch method {
	case mcp.MethodPing:
		return iPing
	case mcp.MethodInitialize:
		return iInitialize
	case mcp.MethodToolsList:
		return iToolsList
	case mcp.MethodToolsCall:
		return iToolsCall
	case mcp.MethodResourcesList:
		return iResourcesList
	case mcp.MethodResourcesTemplatesList:
		return iResourcesTemplatesList
	case mcp.MethodResourcesRead:
		return iResourcesRead
	case mcp.MethodResourcesSubscribe:
		return iResourcesSubscribe
	case mcp.MethodResourcesUnsubscribe:
		return iResourcesUnsubscribe
	case mcp.MethodPromptsList:
		return iPromptsList
	case mcp.MethodPromptsGet:
		return iPromptsGet
	case mcp.MethodCompletionComplete:
		return iCompletionComplete
	case mcp.MethodLoggingSetLevel:
		return iLoggingSetLevel
	case mcp.MethodTasksGet:
		return iTasksGet
	case mcp.MethodTasksResult:
		return iTasksResult
	case mcp.MethodTasksList:
		return iTasksList
	case mcp.MethodTasksCancel:
		return iTasksCancel
	case mcp.MethodTasksUpdate:
		return iTasksUpdate
	case mcp.MethodServerDiscover:
		return iServerDiscover
	case mcp.MethodSubscriptionsListen:
		return iSubscriptionsListen
	}
	return NumMethods
}

// MethodLabel returns the metrics label of the method at index i
// (MethodIndex): its name, or "other" for NumMethods.
func MethodLabel(i int) string {
	if i >= 0 && i < NumMethods {
		return methods[i].name
	}
	return unknown.name
}

// NameParam returns the params member that names what a 2026-07-28
// request of method acts on, which Streamable HTTP's Mcp-Name header
// mirrors (SEP-2243): "name" for tools/call and prompts/get, "uri" for
// resources/read, "taskId" for tasks/get, tasks/update and tasks/cancel;
// "" for every other method.
func NameParam(method string) string { return lookup(method).nameParam }

// AnswersAtOnce reports whether a session's request of method is one the
// engine answers at once, on the caller's goroutine, whatever its params
// (its row serves it at once and never on the worker pool): ping, the
// list pages, logging/setLevel, resources/subscribe and unsubscribe,
// tasks/get, tasks/list and tasks/cancel; not initialize, which opens the
// session. Such a request never waits, so that a caller that must not
// (an event loop, a cluster link's reader) may serve it itself; the
// engine may still queue it where a receiving middleware or Authorize
// says it would wait, and answer it later through the reply sink.
func AnswersAtOnce(method string) bool {
	row := lookup(method)
	switch row.now {
	case opNone, opInitialize, opStaticRead, opInlineTool:
		return false
	}
	return row.pool == opNone
}

// ServedAtOnce reports whether the engine serves m, a message of a
// session, at once: a client's answer to a server-to-client request, a
// notification, or a request it answers at once (AnswersAtOnce).
func ServedAtOnce(m *codec.Message) bool {
	switch m.Kind {
	case codec.KindResponse, codec.KindError, codec.KindNotification:
		return true
	case codec.KindRequest:
		return AnswersAtOnce(m.Method)
	}
	return false
}
