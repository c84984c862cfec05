/*
 * curl_ev.c - libcurl's multi_socket interface on the libev default loop
 * (see curl_ev.h): libcurl tells which sockets to watch for what
 * (CURLMOPT_SOCKETFUNCTION) and when to call it back
 * (CURLMOPT_TIMERFUNCTION); both watchers hand the event to
 * curl_multi_socket_action, then finished transfers are collected with
 * curl_multi_info_read.
 */
#include "curl_ev.h"

#include <stdlib.h>

#include <ev.h>

#include "log.h"

/* A socket libcurl asked us to watch. */
struct sock {
	ev_io io;
	struct sock *prev, *next;
};

static struct {
	bool global;          /* curl_global_init done */
	CURLM *multi;
	ev_timer timer;
	struct sock *socks;   /* every watched socket, to free at exit */
	size_t count;         /* transfers added */
	int depth;            /* curl_multi_socket_action calls on the stack */
} G;

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents);

/* Reports every finished transfer to its owner. */
static void collect_done(void)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(G.multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		CURL *easy = m->easy_handle;
		CURLcode rc = m->data.result;  /* m dies with the removal */
		struct curl_ev_xfer *x = NULL;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
		curl_multi_remove_handle(G.multi, easy);
		G.count--;
		if (!x)
			continue;
		x->active = false;
		x->done(x, rc);
	}
}

/* Lets libcurl act on FD (or on its timeout) with the events in ACTION. */
static void act(curl_socket_t fd, int action)
{
	int running;
	G.depth++;
	CURLMcode rc = curl_multi_socket_action(G.multi, fd, action, &running);
	G.depth--;
	if (rc != CURLM_OK)
		log_warn("curl: %s", curl_multi_strerror(rc));
	collect_done();
}

/* A watched socket is ready. */
static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
	int action = (revents & EV_READ ? CURL_CSELECT_IN : 0) |
		     (revents & EV_WRITE ? CURL_CSELECT_OUT : 0);
	(void)loop;
	act(w->fd, action);  /* W may be freed inside: not touched after */
}

/* libcurl's timeout expired. */
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	act(CURL_SOCKET_TIMEOUT, 0);
}

/* Stops watching a socket and frees its record. */
static void sock_free(struct sock *s)
{
	ev_io_stop(EV_DEFAULT, &s->io);
	if (s->prev)
		s->prev->next = s->next;
	else
		G.socks = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

/* CURLMOPT_SOCKETFUNCTION: watch FD for WHAT, or forget it. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct sock *s = socketp;
	(void)easy;
	(void)userp;
	if (what == CURL_POLL_REMOVE) {
		if (s)
			sock_free(s);
		return 0;
	}
	if (!s) {
		s = calloc(1, sizeof *s);
		if (!s)
			return -1;
		ev_init(&s->io, on_io);
		s->next = G.socks;
		if (G.socks)
			G.socks->prev = s;
		G.socks = s;
		curl_multi_assign(G.multi, fd, s);
	}
	int events = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
	ev_io_stop(EV_DEFAULT, &s->io);
	ev_io_set(&s->io, fd, events);
	ev_io_start(EV_DEFAULT, &s->io);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: (re)arms the one timer; libcurl is not called here. */
static int on_timer_change(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	(void)userp;
	ev_timer_stop(EV_DEFAULT, &G.timer);
	if (timeout_ms >= 0) {
		ev_timer_set(&G.timer, timeout_ms / 1000.0, 0.);
		ev_timer_start(EV_DEFAULT, &G.timer);
	}
	return 0;
}

/* Lazily initializes libcurl and the multi handle. */
int curl_ev_setup(void)
{
	char err[300];
	if (G.multi)
		return 0;
	if (curl_dl_load(err, sizeof err) < 0)
		return log_fail("curl: %s", err);
	if (!G.global) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return log_fail("curl: global initialization failed");
		G.global = true;
	}
	G.multi = curl_multi_init();
	if (!G.multi)
		return log_fail("curl: cannot create a multi handle");
	curl_multi_setopt(G.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(G.multi, CURLMOPT_TIMERFUNCTION, on_timer_change);
	ev_init(&G.timer, on_timer);
	return 0;
}

/* Starts a transfer. */
int curl_ev_add(struct curl_ev_xfer *x)
{
	if (curl_ev_setup() < 0 || G.depth > 0)
		return -1;
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	CURLMcode rc = curl_multi_add_handle(G.multi, x->easy);
	if (rc != CURLM_OK) {
		log_warn("curl: %s", curl_multi_strerror(rc));
		return -1;
	}
	x->active = true;
	G.count++;
	return 0;
}

/* Aborts a transfer. */
void curl_ev_remove(struct curl_ev_xfer *x)
{
	if (!x->active || !G.multi)
		return;
	curl_multi_remove_handle(G.multi, x->easy);
	x->active = false;
	G.count--;
}

/* True inside libcurl. */
bool curl_ev_busy(void)
{
	return G.depth > 0;
}

/* Transfers under way. */
size_t curl_ev_count(void)
{
	return G.count;
}

/* Frees everything at exit. */
void curl_ev_release(void)
{
	if (G.multi) {
		if (G.count)
			log_warn("curl: %zu transfer(s) still added at exit", G.count);
		curl_multi_cleanup(G.multi);  /* may call on_socket and on_timer_change */
		ev_timer_stop(EV_DEFAULT, &G.timer);
		G.multi = NULL;
		G.count = 0;
	}
	while (G.socks)
		sock_free(G.socks);
	if (G.global)
		curl_global_cleanup();
	G.global = false;
}
