/*
 * method.c - MCP method names to codes (method.h).
 */
#include "method.h"

#include <string.h>

/* Names by code. */
static const char *const names[MCP_METHOD_COUNT] = {
	[MCP_OTHER] = "",
	[MCP_INITIALIZE] = "initialize",
	[MCP_PING] = "ping",
	[MCP_SERVER_DISCOVER] = "server/discover",
	[MCP_TOOLS_LIST] = "tools/list",
	[MCP_TOOLS_CALL] = "tools/call",
	[MCP_PROMPTS_LIST] = "prompts/list",
	[MCP_PROMPTS_GET] = "prompts/get",
	[MCP_RESOURCES_LIST] = "resources/list",
	[MCP_RESOURCES_TEMPLATES_LIST] = "resources/templates/list",
	[MCP_RESOURCES_READ] = "resources/read",
	[MCP_RESOURCES_SUBSCRIBE] = "resources/subscribe",
	[MCP_RESOURCES_UNSUBSCRIBE] = "resources/unsubscribe",
	[MCP_COMPLETION_COMPLETE] = "completion/complete",
	[MCP_LOGGING_SET_LEVEL] = "logging/setLevel",
	[MCP_TASKS_LIST] = "tasks/list",
	[MCP_TASKS_GET] = "tasks/get",
	[MCP_TASKS_RESULT] = "tasks/result",
	[MCP_TASKS_CANCEL] = "tasks/cancel",
	[MCP_NOTE_INITIALIZED] = "notifications/initialized",
	[MCP_NOTE_CANCELLED] = "notifications/cancelled",
	[MCP_NOTE_PROGRESS] = "notifications/progress",
};

/*
 * The code of the N bytes at NAME. The length leaves at most four names,
 * each compared with a memcmp of constant size (a few word compares).
 */
#define IS(lit) (memcmp(name, lit, sizeof lit - 1) == 0)
enum mcp_method mcp_method_of(const char *name, size_t n)
{
	if (!name)
		return MCP_OTHER;
	switch (n) {
	case 4:
		if (IS("ping"))
			return MCP_PING;
		break;
	case 9:
		if (IS("tasks/get"))
			return MCP_TASKS_GET;
		break;
	case 10:
		if (IS("initialize"))
			return MCP_INITIALIZE;
		if (IS("tools/list"))
			return MCP_TOOLS_LIST;
		if (IS("tools/call"))
			return MCP_TOOLS_CALL;
		if (IS("tasks/list"))
			return MCP_TASKS_LIST;
		break;
	case 11:
		if (IS("prompts/get"))
			return MCP_PROMPTS_GET;
		break;
	case 12:
		if (IS("prompts/list"))
			return MCP_PROMPTS_LIST;
		if (IS("tasks/result"))
			return MCP_TASKS_RESULT;
		if (IS("tasks/cancel"))
			return MCP_TASKS_CANCEL;
		break;
	case 14:
		if (IS("resources/list"))
			return MCP_RESOURCES_LIST;
		if (IS("resources/read"))
			return MCP_RESOURCES_READ;
		break;
	case 15:
		if (IS("server/discover"))
			return MCP_SERVER_DISCOVER;
		break;
	case 16:
		if (IS("logging/setLevel"))
			return MCP_LOGGING_SET_LEVEL;
		break;
	case 19:
		if (IS("resources/subscribe"))
			return MCP_RESOURCES_SUBSCRIBE;
		if (IS("completion/complete"))
			return MCP_COMPLETION_COMPLETE;
		break;
	case 21:
		if (IS("resources/unsubscribe"))
			return MCP_RESOURCES_UNSUBSCRIBE;
		break;
	case 22:
		if (IS("notifications/progress"))
			return MCP_NOTE_PROGRESS;
		break;
	case 23:
		if (IS("notifications/cancelled"))
			return MCP_NOTE_CANCELLED;
		break;
	case 24:
		if (IS("resources/templates/list"))
			return MCP_RESOURCES_TEMPLATES_LIST;
		break;
	case 25:
		if (IS("notifications/initialized"))
			return MCP_NOTE_INITIALIZED;
		break;
	}
	return MCP_OTHER;
}
#undef IS

/* The code of the NUL-terminated NAME. */
enum mcp_method mcp_method_code(const char *name)
{
	return name ? mcp_method_of(name, strlen(name)) : MCP_OTHER;
}

/* The name of CODE. */
const char *mcp_method_name(enum mcp_method code)
{
	return (unsigned)code < MCP_METHOD_COUNT ? names[code] : "";
}
