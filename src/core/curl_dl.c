/*
 * curl_dl.c - opening libcurl on first use (see curl_dl.h for why).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* the real names, not the table's macros, are looked up here */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

struct curl_api;
#include "curl_dl.h"

struct curl_api curl_api;

static void *lib;

/* One symbol to look up and where its address goes. */
struct sym {
	const char *name;
	void **slot;
};

/* Looks every symbol up; 0 or -1 with the missing name in ERR. */
static int resolve(char *err, size_t n)
{
	const struct sym syms[] = {
#define S(field, sym) { #sym, (void **)&curl_api.field }
		S(global_init, curl_global_init), S(global_cleanup, curl_global_cleanup),
		S(easy_init, curl_easy_init), S(easy_setopt, curl_easy_setopt),
		S(easy_getinfo, curl_easy_getinfo), S(easy_pause, curl_easy_pause),
		S(easy_cleanup, curl_easy_cleanup), S(easy_strerror, curl_easy_strerror),
		S(multi_init, curl_multi_init), S(multi_setopt, curl_multi_setopt),
		S(multi_add_handle, curl_multi_add_handle),
		S(multi_remove_handle, curl_multi_remove_handle),
		S(multi_socket_action, curl_multi_socket_action),
		S(multi_info_read, curl_multi_info_read), S(multi_assign, curl_multi_assign),
		S(multi_cleanup, curl_multi_cleanup), S(multi_strerror, curl_multi_strerror),
		S(slist_append, curl_slist_append), S(slist_free_all, curl_slist_free_all),
		S(url, curl_url), S(url_set, curl_url_set), S(url_get, curl_url_get),
		S(url_cleanup, curl_url_cleanup), S(free, curl_free),
#undef S
	};
	for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(err, n, "libcurl has no %s", syms[i].name);
			return -1;
		}
	}
	return 0;
}

/* Opens libcurl once. */
int curl_dl_load(char *err, size_t n)
{
	if (lib)
		return 0;
	lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(err, n, "cannot load libcurl: %s", dlerror());
		return -1;
	}
	if (resolve(err, n) < 0) {
		dlclose(lib);
		lib = NULL;
		memset(&curl_api, 0, sizeof curl_api);
		return -1;
	}
	return 0;
}
