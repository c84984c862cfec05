/*
 * method.h - the MCP methods the chain and its modules act on, as codes.
 *
 * A request's or notification's method is named once, when its exchange
 * (or notification) is made, and the code travels in mw_ctx beside the
 * name: a module asks "is this tools/call?" with one integer compare
 * instead of a string compare per question per message. Every method
 * not listed is MCP_OTHER; its name is still in ctx->method.
 */
#ifndef MCPC_METHOD_H
#define MCPC_METHOD_H

#include <stdbool.h>
#include <stddef.h>

enum mcp_method {
	MCP_OTHER,                     /* any other method, or none */
	MCP_INITIALIZE,
	MCP_PING,
	MCP_SERVER_DISCOVER,
	MCP_TOOLS_LIST,
	MCP_TOOLS_CALL,
	MCP_PROMPTS_LIST,
	MCP_PROMPTS_GET,
	MCP_RESOURCES_LIST,
	MCP_RESOURCES_TEMPLATES_LIST,
	MCP_RESOURCES_READ,
	MCP_RESOURCES_SUBSCRIBE,
	MCP_RESOURCES_UNSUBSCRIBE,
	MCP_COMPLETION_COMPLETE,
	MCP_LOGGING_SET_LEVEL,
	MCP_TASKS_LIST,
	MCP_TASKS_GET,
	MCP_TASKS_RESULT,
	MCP_TASKS_CANCEL,
	MCP_NOTE_INITIALIZED,          /* notifications/initialized */
	MCP_NOTE_CANCELLED,            /* notifications/cancelled */
	MCP_NOTE_PROGRESS,             /* notifications/progress */
	MCP_METHOD_COUNT
};

/* The code of the N bytes at NAME (NULL: MCP_OTHER). */
enum mcp_method mcp_method_of(const char *name, size_t n);

/* The code of the NUL-terminated NAME (NULL: MCP_OTHER). */
enum mcp_method mcp_method_code(const char *name);

/* The name of CODE; "" for MCP_OTHER. */
const char *mcp_method_name(enum mcp_method code);

/* True for the methods whose subject is a resource URI (resources/read,
 * resources/subscribe, resources/unsubscribe). */
static inline bool mcp_method_on_resource(enum mcp_method m)
{
	return m == MCP_RESOURCES_READ || m == MCP_RESOURCES_SUBSCRIBE ||
		m == MCP_RESOURCES_UNSUBSCRIBE;
}

#endif
