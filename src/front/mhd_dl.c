/*
 * mhd_dl.c - opening libmicrohttpd on first use (see mhd_dl.h for why).
 */
#define MHD_DL_NO_MACROS 1   /* the real names are looked up here */
#include "mhd_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct mhd_api mhd_api;

static void *lib;

/* Looks every symbol up; 0 or -1 with the missing name in ERR. */
static int resolve(char *err, size_t n)
{
	const struct { const char *name; void **slot; } syms[] = {
#define S(field, sym) { #sym, (void **)&mhd_api.field }
		S(start_daemon, MHD_start_daemon), S(stop_daemon, MHD_stop_daemon),
		S(quiesce_daemon, MHD_quiesce_daemon), S(run, MHD_run),
		S(get_timeout, MHD_get_timeout), S(get_daemon_info, MHD_get_daemon_info),
		S(get_connection_info, MHD_get_connection_info),
		S(lookup_connection_value, MHD_lookup_connection_value),
		S(suspend_connection, MHD_suspend_connection),
		S(resume_connection, MHD_resume_connection),
		S(create_response_from_buffer, MHD_create_response_from_buffer),
		S(create_response_from_callback, MHD_create_response_from_callback),
		S(add_response_header, MHD_add_response_header),
		S(queue_response, MHD_queue_response), S(destroy_response, MHD_destroy_response),
#undef S
	};
	for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(err, n, "libmicrohttpd has no %s", syms[i].name);
			return -1;
		}
	}
	return 0;
}

/* Opens libmicrohttpd once. */
int mhd_dl_load(char *err, size_t n)
{
	if (lib)
		return 0;
	lib = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(err, n, "cannot load libmicrohttpd: %s", dlerror());
		return -1;
	}
	if (resolve(err, n) < 0) {
		dlclose(lib);
		lib = NULL;
		memset(&mhd_api, 0, sizeof mhd_api);
		return -1;
	}
	return 0;
}
