/*
 * mhd_dl.h - libmicrohttpd, loaded when the HTTP front starts.
 *
 * Linking libmicrohttpd pulls in GnuTLS and its dependencies (p11-kit,
 * nettle, gmp, libtasn1, libidn2, libunistring, libffi) and costs every
 * mcp-chain about 2.6 MB of resident memory at start, --listen or not
 * (3.7 MB -> 6.3 MB measured on the stdio echo benchmark). As with libcurl
 * (curl_dl.h), the library is opened with dlopen the first time it is
 * needed, and the functions the front uses are reached through a table;
 * the macros below keep the call sites reading like plain libmicrohttpd.
 * Include this instead of <microhttpd.h>.
 */
#ifndef MCPC_MHD_DL_H
#define MCPC_MHD_DL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

/* The functions of libmicrohttpd the front calls, with their own types. */
struct mhd_api {
	__typeof__(&MHD_start_daemon) start_daemon;
	__typeof__(&MHD_stop_daemon) stop_daemon;
	__typeof__(&MHD_quiesce_daemon) quiesce_daemon;
	__typeof__(&MHD_run) run;
	__typeof__(&MHD_get_timeout) get_timeout;
	__typeof__(&MHD_get_daemon_info) get_daemon_info;
	__typeof__(&MHD_get_connection_info) get_connection_info;
	__typeof__(&MHD_lookup_connection_value) lookup_connection_value;
	__typeof__(&MHD_suspend_connection) suspend_connection;
	__typeof__(&MHD_resume_connection) resume_connection;
	__typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
	__typeof__(&MHD_create_response_from_callback) create_response_from_callback;
	__typeof__(&MHD_add_response_header) add_response_header;
	__typeof__(&MHD_queue_response) queue_response;
	__typeof__(&MHD_destroy_response) destroy_response;
};

extern struct mhd_api mhd_api;

/* Loads libmicrohttpd (once); 0, or -1 with the reason in ERR (of N bytes). */
int mhd_dl_load(char *err, size_t n);

#ifndef MHD_DL_NO_MACROS
#define MHD_start_daemon mhd_api.start_daemon
#define MHD_stop_daemon mhd_api.stop_daemon
#define MHD_quiesce_daemon mhd_api.quiesce_daemon
#define MHD_run mhd_api.run
#define MHD_get_timeout mhd_api.get_timeout
#define MHD_get_daemon_info mhd_api.get_daemon_info
#define MHD_get_connection_info mhd_api.get_connection_info
#define MHD_lookup_connection_value mhd_api.lookup_connection_value
#define MHD_suspend_connection mhd_api.suspend_connection
#define MHD_resume_connection mhd_api.resume_connection
#define MHD_create_response_from_buffer mhd_api.create_response_from_buffer
#define MHD_create_response_from_callback mhd_api.create_response_from_callback
#define MHD_add_response_header mhd_api.add_response_header
#define MHD_queue_response mhd_api.queue_response
#define MHD_destroy_response mhd_api.destroy_response
#endif

#endif
