/*
 * curl_dl.h - libcurl, loaded when the first HTTP upstream starts.
 *
 * Linking libcurl pulls in its whole dependency tree (TLS, Kerberos,
 * LDAP, SSH...) and costs every mcp-chain about 4.5 MB of resident memory
 * at start, HTTP upstreams or not. Instead the library is opened with
 * dlopen the first time it is needed, and the functions mcp-chain uses
 * are reached through a table; the macros below keep the call sites
 * reading like plain libcurl. Include this instead of <curl/curl.h>.
 */
#ifndef MCPC_CURL_DL_H
#define MCPC_CURL_DL_H

#include <stddef.h>

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

struct curl_api {
	CURLcode (*global_init)(long flags);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	CURLcode (*easy_pause)(CURL *h, int bitmask);
	void (*easy_cleanup)(CURL *h);
	const char *(*easy_strerror)(CURLcode rc);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *m, CURLMoption opt, ...);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_socket_action)(CURLM *m, curl_socket_t s, int ev, int *running);
	CURLMsg *(*multi_info_read)(CURLM *m, int *left);
	CURLMcode (*multi_assign)(CURLM *m, curl_socket_t s, void *p);
	CURLMcode (*multi_cleanup)(CURLM *m);
	const char *(*multi_strerror)(CURLMcode rc);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
	CURLU *(*url)(void);
	CURLUcode (*url_set)(CURLU *u, CURLUPart part, const char *s, unsigned int flags);
	CURLUcode (*url_get)(const CURLU *u, CURLUPart part, char **s, unsigned int flags);
	void (*url_cleanup)(CURLU *u);
	void (*free)(void *p);
};

extern struct curl_api curl_api;

/* Loads libcurl (once); 0, or -1 with the reason in ERR (of N bytes). */
int curl_dl_load(char *err, size_t n);

/* curl.h wraps these three in argument-count macros of its own */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init curl_api.global_init
#define curl_global_cleanup curl_api.global_cleanup
#define curl_easy_init curl_api.easy_init
#define curl_easy_setopt curl_api.easy_setopt
#define curl_easy_getinfo curl_api.easy_getinfo
#define curl_easy_pause curl_api.easy_pause
#define curl_easy_cleanup curl_api.easy_cleanup
#define curl_easy_strerror curl_api.easy_strerror
#define curl_multi_init curl_api.multi_init
#define curl_multi_setopt curl_api.multi_setopt
#define curl_multi_add_handle curl_api.multi_add_handle
#define curl_multi_remove_handle curl_api.multi_remove_handle
#define curl_multi_socket_action curl_api.multi_socket_action
#define curl_multi_info_read curl_api.multi_info_read
#define curl_multi_assign curl_api.multi_assign
#define curl_multi_cleanup curl_api.multi_cleanup
#define curl_multi_strerror curl_api.multi_strerror
#define curl_slist_append curl_api.slist_append
#define curl_slist_free_all curl_api.slist_free_all
#define curl_url curl_api.url
#define curl_url_set curl_api.url_set
#define curl_url_get curl_api.url_get
#define curl_url_cleanup curl_api.url_cleanup
#define curl_free curl_api.free

#endif
