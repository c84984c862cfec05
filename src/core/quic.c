/*
 * quic.c - QUIC connections on the loop (see quic.h): ngtcp2 0.12 with
 * GnuTLS for TLS 1.3, one non-blocking UDP socket per endpoint.
 *
 * Packets are read in bounded batches and handed to ngtcp2, whose
 * callbacks reach the user's ops. Output is never written from inside a
 * callback: a connection with something to send is marked dirty and one
 * ev_prepare watcher (shared by every endpoint, so that a callback of one
 * endpoint writing on another is flushed in the same round) writes it
 * before the loop sleeps. Stream bytes stay in a chunk list until the peer
 * acknowledges them (ngtcp2 keeps pointers to them for retransmission).
 *
 * A connection ends in one of three ways: we close it (CONNECTION_CLOSE
 * sent once, kept for the closing period of 3 PTO, repeated to a peer
 * that keeps sending), the peer closes it (draining period of 3 PTO) or
 * it goes idle or fails at once. Then it is marked dead and, at the next
 * safe point (the prepare watcher), its closed() is told and it is freed.
 */
#include "quic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "hmap.h"
#include "log.h"

#define SCID_LEN 18                 /* our connection ids (server) */
#define READ_BATCH 64               /* datagrams read per wakeup */
#define CHUNK_MIN (64 * 1024)       /* a send chunk's least capacity */
#define DGRAM_QUEUE_MAX 64          /* datagrams waiting for the next flush */
#define FLUSH_ROUNDS 16             /* prepare rounds before the loop sleeps */
#define TLS_PRIORITY "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3"

enum qc_state { QC_OPEN, QC_CLOSING, QC_DRAINING, QC_DEAD };

/* Bytes queued on a stream, from absolute stream offset OFF. */
struct chunk {
	struct chunk *next;
	uint64_t off;
	size_t len, cap;
	uint8_t data[];
};

struct qstream {
	int64_t sid;
	struct qstream *prev, *next;   /* the connection's streams */
	struct chunk *head, *tail;     /* unacknowledged bytes */
	uint64_t total;                /* bytes ever queued */
	uint64_t sent;                 /* handed to ngtcp2 */
	uint64_t acked;                /* acknowledged by the peer */
	unsigned gen;                  /* flush round it was blocked in */
	bool fin_queued, fin_sent;
	bool wclosed;                  /* reset or stopped: sends nothing more */
	bool high;                     /* queued reached the low water mark */
};

struct dgram {
	struct dgram *next;
	size_t len;
	uint8_t data[];
};

struct quic_conn {
	struct quic_endpoint *ep;
	struct quic_conn *prev, *next;     /* the endpoint's connections */
	ngtcp2_conn *conn;
	ngtcp2_crypto_conn_ref ref;
	gnutls_session_t tls;
	gnutls_certificate_credentials_t cred;  /* a client's own */
	const struct quic_conn_ops *ops;
	void *arg;
	ev_timer timer;
	enum qc_state state;
	bool dirty, close_req, ready_told;
	unsigned gen;
	struct hmap streams;               /* sid → struct qstream */
	struct qstream *streams_head;
	struct dgram *dg_head, *dg_tail;
	size_t ndg;
	ngtcp2_cid odcid;                  /* the client's first DCID (server) */
	ngtcp2_connection_close_error err; /* what we close with */
	char *close_reason;                /* err's reason, owned */
	uint8_t *closebuf;                 /* the CONNECTION_CLOSE packet sent */
	size_t closelen;
	uint8_t pin[32];
	struct sockaddr_storage peer;
	socklen_t peerlen;
	char peer_str[64];
	char why[256];                     /* the reason closed() is told */
};

struct quic_endpoint {
	struct quic_endpoint *prev, *next; /* every endpoint, for the flush */
	int fd;
	bool server;
	struct sockaddr_storage local;
	socklen_t locallen;
	ev_io rio, wio;
	struct hmap cids;                  /* DCID → struct quic_conn (server) */
	struct quic_conn *conns;
	size_t nconns;
	gnutls_certificate_credentials_t cred;
	struct quic_server_opts o;
	char *alpn;
	quic_accept_fn accept;
	void *arg;
	uint8_t secret[32];                /* stateless reset tokens */
	uint8_t *blk;                      /* a packet the socket refused */
	size_t blklen;
	struct sockaddr_storage blkto;
	socklen_t blktolen;
};

/* Every endpoint and the watcher that flushes them before the loop sleeps. */
static struct {
	struct quic_endpoint *eps;
	ev_prepare prep;
	bool started;
	uint8_t txbuf[65536];
} Q;

static void conn_die(struct quic_conn *c, const char *why);
static void conn_start_closing(struct quic_conn *c);

/* The monotonic clock in ngtcp2's nanoseconds. */
static ngtcp2_tstamp now_ts(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NGTCP2_SECONDS + (uint64_t)ts.tv_nsec;
}

/* Fills BUF with LEN random bytes: 0 or -1. */
static int rand_bytes(void *buf, size_t len)
{
	return gnutls_rnd(GNUTLS_RND_RANDOM, buf, len) == 0 ? 0 : -1;
}

/* Writes "ip:port" of SA into OUT. */
static void addr_str(const struct sockaddr *sa, socklen_t len, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN + 2] = "?", port[8] = "0";
	getnameinfo(sa, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
	if (sa->sa_family == AF_INET6)
		snprintf(out, n, "[%s]:%s", host, port);
	else
		snprintf(out, n, "%s:%s", host, port);
}

/* Marks C as having output to flush before the loop sleeps. */
static void conn_touch(struct quic_conn *c)
{
	c->dirty = true;
}

/* ---- streams ---- */

/* The stream SID of C, or NULL. */
static struct qstream *stream_find(const struct quic_conn *c, int64_t sid)
{
	return hmap_get(&c->streams, &sid, sizeof sid);
}

/* A new stream SID in C's map and list, or NULL (out of memory). */
static struct qstream *stream_new(struct quic_conn *c, int64_t sid)
{
	struct qstream *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->sid = sid;
	if (hmap_put(&c->streams, &s->sid, sizeof s->sid, s) != 0) {
		free(s);
		return NULL;
	}
	s->next = c->streams_head;
	if (s->next)
		s->next->prev = s;
	c->streams_head = s;
	return s;
}

/* Frees S's chunks and S (already out of the map and list). */
static void stream_free(struct qstream *s)
{
	struct chunk *k = s->head;
	while (k) {
		struct chunk *next = k->next;
		free(k);
		k = next;
	}
	free(s);
}

/* Takes S out of C's map and list and frees it. */
static void stream_remove(struct quic_conn *c, struct qstream *s)
{
	hmap_del(&c->streams, &s->sid, sizeof s->sid);
	if (s->prev)
		s->prev->next = s->next;
	else
		c->streams_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	stream_free(s);
}

/* Appends LEN bytes to S's queue: 0 or -1 (out of memory). */
static int stream_append(struct qstream *s, const uint8_t *data, size_t len)
{
	struct chunk *t = s->tail;
	if (t && t->cap - t->len >= len) {
		/* bytes past t->len were never handed to ngtcp2: safe to fill */
		memcpy(t->data + t->len, data, len);
		t->len += len;
	} else {
		size_t cap = len > CHUNK_MIN ? len : CHUNK_MIN;
		struct chunk *k = malloc(sizeof *k + cap);
		if (!k)
			return -1;
		k->next = NULL;
		k->off = s->total;
		k->len = len;
		k->cap = cap;
		memcpy(k->data, data, len);
		if (t)
			t->next = k;
		else
			s->head = k;
		s->tail = k;
	}
	s->total += len;
	return 0;
}

/* True when S has bytes or a FIN not yet handed to ngtcp2. */
static bool stream_has_output(const struct qstream *s)
{
	return !s->wclosed && (s->sent < s->total || (s->fin_queued && !s->fin_sent));
}

/* Fills V (at most N) with S's unsent bytes; *ALL: they are all of them. */
static size_t stream_vecs(const struct qstream *s, ngtcp2_vec *v, size_t n, bool *all)
{
	size_t nv = 0;
	const struct chunk *k = s->head;
	*all = true;
	for (; k; k = k->next) {
		if (k->off + k->len <= s->sent)
			continue;
		if (nv == n) {
			*all = false;
			break;
		}
		size_t skip = s->sent > k->off ? (size_t)(s->sent - k->off) : 0;
		v[nv].base = (uint8_t *)k->data + skip;
		v[nv].len = k->len - skip;
		nv++;
	}
	return nv;
}

/* Frees S's chunks the peer has acknowledged entirely. */
static void stream_release_acked(struct qstream *s)
{
	while (s->head && s->head->off + s->head->len <= s->acked) {
		struct chunk *k = s->head;
		s->head = k->next;
		if (!s->head)
			s->tail = NULL;
		free(k);
	}
}

/* The next stream of C with output not blocked in this flush round. */
static struct qstream *stream_next_sendable(struct quic_conn *c)
{
	for (struct qstream *s = c->streams_head; s; s = s->next)
		if (s->gen != c->gen && stream_has_output(s))
			return s;
	return NULL;
}

/* Moves S to the end of C's streams, so that the next packet serves
 * another stream with output first: one large stream never holds the
 * others' bytes back (a small answer on the control stream beside a large
 * result on its own stream). */
static void stream_rotate(struct quic_conn *c, struct qstream *s)
{
	if (!s->next)
		return;
	struct qstream *t = s->next;
	while (t->next)
		t = t->next;
	if (s->prev)
		s->prev->next = s->next;
	else
		c->streams_head = s->next;
	s->next->prev = s->prev;
	s->prev = t;
	s->next = NULL;
	t->next = s;
}

/* ---- sending ---- */

/* Sends one packet to TO: 0, or 1 when the socket is full (the packet is
 * kept and sent when it can take it; nothing more goes out before). */
static int ep_send(struct quic_endpoint *e, const struct sockaddr *to, socklen_t tolen,
		   const uint8_t *data, size_t len)
{
	ssize_t n;
	do
		n = sendto(e->fd, data, len, 0, to, tolen);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return 0;
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
		log_debug("quic: sendto: %s", strerror(errno));
		return 0;  /* lost, as UDP may lose it: QUIC recovers */
	}
	uint8_t *copy = malloc(len);
	if (!copy)
		return 1;
	memcpy(copy, data, len);
	free(e->blk);
	e->blk = copy;
	e->blklen = len;
	memcpy(&e->blkto, to, tolen);
	e->blktolen = tolen;
	ev_io_start(EV_DEFAULT, &e->wio);
	return 1;
}

/* Arms C's timer at ngtcp2's next expiry. */
static void conn_arm_timer(struct quic_conn *c)
{
	ngtcp2_tstamp exp = ngtcp2_conn_get_expiry(c->conn), now = now_ts();
	ev_timer_stop(EV_DEFAULT, &c->timer);
	if (exp == UINT64_MAX)
		return;
	double t = exp <= now ? 0.0 : (double)(exp - now) / NGTCP2_SECONDS;
	ev_timer_set(&c->timer, t, 0.0);
	ev_timer_start(EV_DEFAULT, &c->timer);
}

/* Starts C's closing or draining period: 3 PTO on the timer. */
static void conn_start_period(struct quic_conn *c, enum qc_state st)
{
	c->state = st;
	ev_timer_stop(EV_DEFAULT, &c->timer);
	double t = 3.0 * (double)ngtcp2_conn_get_pto(c->conn) / NGTCP2_SECONDS;
	ev_timer_set(&c->timer, t, 0.0);
	ev_timer_start(EV_DEFAULT, &c->timer);
}

/* Records C's close error as the library error LIBERR (first one wins). */
static void conn_set_liberr(struct quic_conn *c, int liberr)
{
	if (c->close_req)
		return;
	if (liberr == NGTCP2_ERR_CRYPTO)
		ngtcp2_connection_close_error_set_transport_error_tls_alert(
			&c->err, ngtcp2_conn_get_tls_alert(c->conn), NULL, 0);
	else
		ngtcp2_connection_close_error_set_transport_error_liberr(&c->err, liberr, NULL, 0);
	c->close_req = true;
	if (!c->why[0])
		snprintf(c->why, sizeof c->why, "%s", ngtcp2_strerror(liberr));
}

/* Sends C's pending datagrams: 0, 1 (socket full) or -1 (fatal, closed). */
static int conn_flush_dgrams(struct quic_conn *c, ngtcp2_path_storage *ps, size_t max,
			     ngtcp2_tstamp ts)
{
	while (c->dg_head) {
		struct dgram *d = c->dg_head;
		ngtcp2_vec v = { d->data, d->len };
		ngtcp2_pkt_info pi;
		int acc = 0;
		ngtcp2_ssize n = ngtcp2_conn_writev_datagram(c->conn, &ps->path, &pi, Q.txbuf, max,
							     &acc, NGTCP2_WRITE_DATAGRAM_FLAG_NONE,
							     0, &v, 1, ts);
		if (n < 0 && n != NGTCP2_ERR_INVALID_ARGUMENT && n != NGTCP2_ERR_INVALID_STATE) {
			conn_set_liberr(c, (int)n);
			conn_start_closing(c);
			return -1;
		}
		if (n == 0)
			return 0;  /* congestion: tried again at the next flush */
		if (acc || n < 0) {
			c->dg_head = d->next;
			if (!c->dg_head)
				c->dg_tail = NULL;
			c->ndg--;
			free(d);
		}
		if (n > 0 && ep_send(c->ep, ps->path.remote.addr, ps->path.remote.addrlen,
				     Q.txbuf, (size_t)n))
			return 1;
	}
	return 0;
}

/* Hands ND bytes (and FIN) of S to ngtcp2's accounting. */
static void stream_advance(struct qstream *s, ngtcp2_ssize nd, bool fin)
{
	if (nd > 0)
		s->sent += (uint64_t)nd;
	if (fin && s->sent == s->total)
		s->fin_sent = true;
}

/* Writes C's packets until ngtcp2 has nothing more or the socket is full. */
static void conn_flush(struct quic_conn *c)
{
	c->dirty = false;
	if (c->state != QC_OPEN)
		return;
	if (c->close_req) {
		conn_start_closing(c);
		return;
	}
	if (c->ep->blk)
		return;  /* resumed when the socket takes the kept packet */
	ngtcp2_path_storage ps;
	ngtcp2_path_storage_zero(&ps);
	ngtcp2_tstamp ts = now_ts();
	size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(c->conn);
	if (max > sizeof Q.txbuf)
		max = sizeof Q.txbuf;
	c->gen++;
	int rc = conn_flush_dgrams(c, &ps, max, ts);
	if (rc < 0)
		return;
	while (rc == 0) {
		struct qstream *s = stream_next_sendable(c);
		ngtcp2_vec v[16];
		size_t nv = 0;
		bool all = true;
		int64_t sid = -1;
		uint32_t fl = NGTCP2_WRITE_STREAM_FLAG_MORE;
		if (s) {
			nv = stream_vecs(s, v, 16, &all);
			sid = s->sid;
			if (all && s->fin_queued)
				fl |= NGTCP2_WRITE_STREAM_FLAG_FIN;
		}
		ngtcp2_ssize nd = -1;
		ngtcp2_pkt_info pi;
		ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->conn, &ps.path, &pi, Q.txbuf, max, &nd,
							   fl, sid, v, nv, ts);
		if (n < 0) {
			if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
				s->gen = c->gen;
				continue;
			}
			if (n == NGTCP2_ERR_STREAM_SHUT_WR || n == NGTCP2_ERR_STREAM_NOT_FOUND) {
				s->wclosed = true;
				continue;
			}
			if (n == NGTCP2_ERR_WRITE_MORE) {
				stream_advance(s, nd, fl & NGTCP2_WRITE_STREAM_FLAG_FIN);
				if (nd > 0)
					stream_rotate(c, s);
				continue;
			}
			conn_set_liberr(c, (int)n);
			conn_start_closing(c);
			return;
		}
		if (s && nd >= 0) {
			stream_advance(s, nd, fl & NGTCP2_WRITE_STREAM_FLAG_FIN);
			if (nd > 0)
				stream_rotate(c, s);
		}
		if (n == 0)
			break;
		rc = ep_send(c->ep, ps.path.remote.addr, ps.path.remote.addrlen, Q.txbuf,
			     (size_t)n);
	}
	ngtcp2_conn_update_pkt_tx_time(c->conn, ts);
	conn_arm_timer(c);
}

/* Sends CONNECTION_CLOSE once and starts C's closing period (or lets C go
 * at once when there is nothing to send it with). */
static void conn_start_closing(struct quic_conn *c)
{
	if (c->state != QC_OPEN)
		return;
	if (c->err.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_IDLE_CLOSE) {
		conn_die(c, "idle timeout");
		return;
	}
	ngtcp2_path_storage ps;
	ngtcp2_path_storage_zero(&ps);
	ngtcp2_pkt_info pi;
	uint8_t buf[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->conn, &ps.path, &pi, buf, sizeof buf,
							     &c->err, now_ts());
	if (n <= 0) {
		conn_die(c, c->why[0] ? c->why : "closed");
		return;
	}
	free(c->closebuf);
	c->closebuf = malloc((size_t)n);
	if (c->closebuf) {
		memcpy(c->closebuf, buf, (size_t)n);
		c->closelen = (size_t)n;
	}
	ep_send(c->ep, ps.path.remote.addr, ps.path.remote.addrlen, buf, (size_t)n);
	log_debug("quic: %s: closing (%s)", c->peer_str, c->why);
	conn_start_period(c, QC_CLOSING);
}

/* ---- the end of a connection ---- */

/* Marks C dead with WHY (unless a reason was set before): closed() and
 * the free come at the next safe point. */
static void conn_die(struct quic_conn *c, const char *why)
{
	if (c->state == QC_DEAD)
		return;
	if (!c->why[0])
		snprintf(c->why, sizeof c->why, "%s", why ? why : "closed");
	c->state = QC_DEAD;
	ev_timer_stop(EV_DEFAULT, &c->timer);
}

static void ep_free_now(struct quic_endpoint *e);

/* Takes KEY out of E's map when it names C. */
static void ep_forget_cid(struct quic_endpoint *e, const ngtcp2_cid *cid, struct quic_conn *c)
{
	if (hmap_get(&e->cids, cid->data, cid->datalen) == c)
		hmap_del(&e->cids, cid->data, cid->datalen);
}

/* Takes C out of its endpoint: its ids out of the map, itself out of the
 * list. Nothing of the endpoint is touched after (closed() may free it). */
static void conn_detach(struct quic_conn *c)
{
	struct quic_endpoint *e = c->ep;
	if (!e)
		return;
	if (c->conn && e->server) {
		ep_forget_cid(e, &c->odcid, c);
		size_t n = ngtcp2_conn_get_num_scid(c->conn);
		ngtcp2_cid *ids = calloc(n ? n : 1, sizeof *ids);
		if (ids) {
			ngtcp2_conn_get_scid(c->conn, ids);
			for (size_t i = 0; i < n; i++)
				ep_forget_cid(e, &ids[i], c);
			free(ids);
		}
	}
	if (c->prev)
		c->prev->next = c->next;
	else if (e->conns == c)
		e->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	e->nconns--;
	c->ep = NULL;
}

/* Frees detached C and everything it holds. */
static void conn_release(struct quic_conn *c)
{
	ev_timer_stop(EV_DEFAULT, &c->timer);
	size_t ns = 0;
	void **ss = hmap_drain(&c->streams, &ns);
	for (size_t i = 0; i < ns; i++)
		stream_free(ss[i]);
	free(ss);
	hmap_release(&c->streams);
	while (c->dg_head) {
		struct dgram *d = c->dg_head;
		c->dg_head = d->next;
		free(d);
	}
	if (c->conn)
		ngtcp2_conn_del(c->conn);
	if (c->tls)
		gnutls_deinit(c->tls);
	if (c->cred)
		gnutls_certificate_free_credentials(c->cred);
	free(c->close_reason);
	free(c->closebuf);
	free(c);
}

/* Frees C without telling its user (who never had it, or was told). */
static void conn_free(struct quic_conn *c)
{
	conn_detach(c);
	conn_release(c);
}

/* Tells one dead connection of E its end and frees it: false when E has
 * none. Taken out of E first: its closed() may do anything, even free E. */
static bool ep_reap_one(struct quic_endpoint *e)
{
	struct quic_conn *c = e->conns;
	while (c && c->state != QC_DEAD)
		c = c->next;
	if (!c)
		return false;
	conn_detach(c);
	log_debug("quic: %s: closed (%s)", c->peer_str, c->why);
	if (c->ops && c->ops->closed)
		c->ops->closed(c->arg, c, c->why);
	conn_release(c);
	return true;
}

/* Flushes every dirty connection of E: true if any. */
static bool ep_flush(struct quic_endpoint *e)
{
	bool any = false;
	for (struct quic_conn *c = e->conns; c; c = c->next)
		if (c->dirty) {
			any = true;
			conn_flush(c);
		}
	return any;
}

/* Before the loop sleeps: writes what callbacks queued and ends the dead,
 * until nothing changes (bounded). */
static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	for (int round = 0; round < FLUSH_ROUNDS; round++) {
		bool any = false;
		struct quic_endpoint *e;
		for (e = Q.eps; e; e = e->next)
			any |= ep_flush(e);
		/* one end at a time, from the start again: a closed() callback
		 * may open or free connections and endpoints */
		for (bool more = true; more;) {
			more = false;
			for (e = Q.eps; e; e = e->next) {
				if (ep_reap_one(e)) {
					more = true;
					break;  /* E may be gone */
				}
				if (!e->server && !e->conns) {
					ep_free_now(e);  /* a client's endpoint ends with its conn */
					more = true;
					break;
				}
			}
			any |= more;
		}
		if (!any)
			break;
	}
}

/* ---- ngtcp2 callbacks ---- */

/* ngtcp2: the handshake is complete. */
static int cb_handshake_completed(ngtcp2_conn *conn, void *ud)
{
	struct quic_conn *c = ud;
	(void)conn;
	log_debug("quic: %s: handshake complete", c->peer_str);
	if (!c->ready_told && c->ops && c->ops->ready) {
		c->ready_told = true;
		c->ops->ready(c->arg, c);
	}
	return 0;
}

/* ngtcp2: stream bytes in order. */
static int cb_recv_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t offset,
			       const uint8_t *data, size_t len, void *ud, void *sud)
{
	struct quic_conn *c = ud;
	(void)offset;
	(void)sud;
	if (c->state == QC_OPEN && c->ops->stream_data)
		c->ops->stream_data(c->arg, c, sid, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
	ngtcp2_conn_extend_max_stream_offset(conn, sid, len);
	ngtcp2_conn_extend_max_offset(conn, len);
	return 0;
}

/* ngtcp2: the peer acknowledged LEN bytes of SID from OFFSET. */
static int cb_acked(ngtcp2_conn *conn, int64_t sid, uint64_t offset, uint64_t len, void *ud,
		    void *sud)
{
	struct quic_conn *c = ud;
	struct qstream *s = sud;
	(void)conn;
	if (!s)
		return 0;
	if (offset + len > s->acked)
		s->acked = offset + len;
	stream_release_acked(s);
	if (s->high && s->total - s->acked < QUIC_STREAM_LOW_WATER) {
		s->high = false;
		if (c->state == QC_OPEN && c->ops->writable)
			c->ops->writable(c->arg, c, sid);
	}
	return 0;
}

/* ngtcp2: the peer opened stream SID. */
static int cb_stream_open(ngtcp2_conn *conn, int64_t sid, void *ud)
{
	struct quic_conn *c = ud;
	struct qstream *s = stream_new(c, sid);
	if (!s)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	ngtcp2_conn_set_stream_user_data(conn, sid, s);
	return 0;
}

/* ngtcp2: stream SID is closed both ways. */
static int cb_stream_close(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t code,
			   void *ud, void *sud)
{
	struct quic_conn *c = ud;
	struct qstream *s = sud ? sud : stream_find(c, sid);
	(void)flags;
	(void)code;
	if (!ngtcp2_conn_is_local_stream(conn, sid)) {
		if (ngtcp2_is_bidi_stream(sid))
			ngtcp2_conn_extend_max_streams_bidi(conn, 1);
		else
			ngtcp2_conn_extend_max_streams_uni(conn, 1);
	}
	if (c->state == QC_OPEN && c->ops->stream_close)
		c->ops->stream_close(c->arg, c, sid);
	if (s)
		stream_remove(c, s);
	return 0;
}

/* ngtcp2: the peer reset SID. */
static int cb_stream_reset(ngtcp2_conn *conn, int64_t sid, uint64_t final_size, uint64_t code,
			   void *ud, void *sud)
{
	struct quic_conn *c = ud;
	(void)conn;
	(void)final_size;
	(void)sud;
	if (c->state == QC_OPEN && c->ops->stream_reset)
		c->ops->stream_reset(c->arg, c, sid, code, true);
	return 0;
}

/* ngtcp2: more room on SID or the connection: try writing again. */
static int cb_extend_stream_data(ngtcp2_conn *conn, int64_t sid, uint64_t max, void *ud,
				 void *sud)
{
	(void)conn;
	(void)sid;
	(void)max;
	(void)sud;
	conn_touch(ud);
	return 0;
}

/* ngtcp2: a DATAGRAM frame. */
static int cb_recv_datagram(ngtcp2_conn *conn, uint32_t flags, const uint8_t *data, size_t len,
			    void *ud)
{
	struct quic_conn *c = ud;
	(void)conn;
	(void)flags;
	if (c->state == QC_OPEN && c->ops->datagram)
		c->ops->datagram(c->arg, c, data, len);
	return 0;
}

/* ngtcp2: random bytes that need not be secret. */
static void cb_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
	(void)ctx;
	gnutls_rnd(GNUTLS_RND_NONCE, dest, len);
}

/* ngtcp2: a new connection id of ours, with its stateless reset token. */
static int cb_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
		      void *ud)
{
	struct quic_conn *c = ud;
	(void)conn;
	if (rand_bytes(cid->data, cidlen) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	cid->datalen = cidlen;
	if (ngtcp2_crypto_generate_stateless_reset_token(token, c->ep->secret,
							 sizeof c->ep->secret, cid) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	if (c->ep->server && hmap_put(&c->ep->cids, cid->data, cid->datalen, c) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

/* ngtcp2: a connection id of ours is retired. */
static int cb_remove_cid(ngtcp2_conn *conn, const ngtcp2_cid *cid, void *ud)
{
	struct quic_conn *c = ud;
	(void)conn;
	if (c->ep->server)
		ep_forget_cid(c->ep, cid, c);
	return 0;
}

/* The callbacks of a server (SERVER) or client connection. */
static void set_callbacks(ngtcp2_callbacks *cb, bool server)
{
	memset(cb, 0, sizeof *cb);
	if (server) {
		cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
	} else {
		cb->client_initial = ngtcp2_crypto_client_initial_cb;
		cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
	}
	cb->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
	cb->encrypt = ngtcp2_crypto_encrypt_cb;
	cb->decrypt = ngtcp2_crypto_decrypt_cb;
	cb->hp_mask = ngtcp2_crypto_hp_mask_cb;
	cb->update_key = ngtcp2_crypto_update_key_cb;
	cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
	cb->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
	cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
	cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
	cb->handshake_completed = cb_handshake_completed;
	cb->recv_stream_data = cb_recv_stream_data;
	cb->acked_stream_data_offset = cb_acked;
	cb->stream_open = cb_stream_open;
	cb->stream_close = cb_stream_close;
	cb->stream_reset = cb_stream_reset;
	cb->extend_max_stream_data = cb_extend_stream_data;
	cb->recv_datagram = cb_recv_datagram;
	cb->rand = cb_rand;
	cb->get_new_connection_id = cb_new_cid;
	cb->remove_connection_id = cb_remove_cid;
}

/* The transport parameters both sides offer (limits as quic.h says). */
static void set_params(ngtcp2_transport_params *p, double idle, uint64_t bidi, uint64_t uni,
		       size_t max_dgram)
{
	ngtcp2_transport_params_default(p);
	p->initial_max_data = 16 * 1024 * 1024;
	p->initial_max_stream_data_bidi_local = 4 * 1024 * 1024;
	p->initial_max_stream_data_bidi_remote = 4 * 1024 * 1024;
	p->initial_max_stream_data_uni = 4 * 1024 * 1024;
	p->initial_max_streams_bidi = bidi;
	p->initial_max_streams_uni = uni;
	p->max_idle_timeout = (ngtcp2_duration)(idle * (double)NGTCP2_SECONDS);
	p->max_datagram_frame_size = max_dgram;
	p->active_connection_id_limit = 4;
}

/* ngtcp2's conn of a TLS session (conn_ref). */
static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
	struct quic_conn *c = ref->user_data;
	return c->conn;
}

/* ---- connections, both sides ---- */

/* The timer: ngtcp2's expiry, or the end of a closing or draining period. */
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct quic_conn *c = w->data;
	(void)loop;
	(void)revents;
	if (c->state != QC_OPEN) {
		conn_die(c, NULL);
		return;
	}
	int rv = ngtcp2_conn_handle_expiry(c->conn, now_ts());
	if (rv == NGTCP2_ERR_IDLE_CLOSE) {
		conn_die(c, "idle timeout");
		return;
	}
	if (rv != 0) {
		conn_set_liberr(c, rv);
		conn_start_closing(c);
		return;
	}
	conn_touch(c);
}

/* A new connection of endpoint E with peer SA, in E's list. */
static struct quic_conn *conn_new(struct quic_endpoint *e, const struct sockaddr *sa,
				  socklen_t salen)
{
	struct quic_conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->ep = e;
	c->ref.get_conn = get_conn;
	c->ref.user_data = c;
	memcpy(&c->peer, sa, salen);
	c->peerlen = salen;
	addr_str(sa, salen, c->peer_str, sizeof c->peer_str);
	ngtcp2_connection_close_error_default(&c->err);
	ev_timer_init(&c->timer, on_timer, 0.0, 0.0);
	c->timer.data = c;
	c->next = e->conns;
	if (c->next)
		c->next->prev = c;
	e->conns = c;
	e->nconns++;
	return c;
}

/* The path of a packet between E and C's peer. */
static ngtcp2_path conn_path(struct quic_conn *c)
{
	ngtcp2_path p = {
		{ (struct sockaddr *)&c->ep->local, c->ep->locallen },
		{ (struct sockaddr *)&c->peer, c->peerlen },
		NULL,
	};
	return p;
}

/* The peer closed C: its reason, and the draining period. */
static void conn_peer_closed(struct quic_conn *c)
{
	ngtcp2_connection_close_error ce;
	ngtcp2_conn_get_connection_close_error(c->conn, &ce);
	if (!c->why[0]) {
		const char *kind = ce.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION ?
					   "application" : "transport";
		snprintf(c->why, sizeof c->why, "peer closed (%s error 0x%llx)%s%.*s", kind,
			 (unsigned long long)ce.error_code, ce.reasonlen ? ": " : "",
			 (int)(ce.reasonlen > 200 ? 200 : ce.reasonlen),
			 ce.reason ? (const char *)ce.reason : "");
		for (char *p = c->why; *p; p++)  /* the peer's words reach our log */
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
	}
	log_debug("quic: %s: %s", c->peer_str, c->why);
	conn_start_period(c, QC_DRAINING);
}

/* A client's reason for a failed handshake: the certificate's verdict. */
static void conn_tls_why(struct quic_conn *c)
{
	if (c->why[0] || c->ep->server)
		return;
	unsigned status = gnutls_session_get_verify_cert_status(c->tls);
	gnutls_datum_t out = { NULL, 0 };
	if (status && gnutls_certificate_verification_status_print(
			      status, GNUTLS_CRT_X509, &out, 0) == 0) {
		snprintf(c->why, sizeof c->why, "certificate rejected: %s", (const char *)out.data);
		gnutls_free(out.data);
	} else {
		snprintf(c->why, sizeof c->why, "TLS handshake failed (alert %u)",
			 ngtcp2_conn_get_tls_alert(c->conn));
	}
}

/* Feeds one packet to C. */
static void conn_read(struct quic_conn *c, const struct sockaddr *from, socklen_t fromlen,
		      const uint8_t *pkt, size_t len)
{
	if (c->state == QC_CLOSING) {
		if (c->closebuf)  /* the peer did not hear it: once more */
			ep_send(c->ep, (const struct sockaddr *)&c->peer, c->peerlen, c->closebuf,
				c->closelen);
		return;
	}
	if (c->state != QC_OPEN)
		return;
	ngtcp2_path path = conn_path(c);
	path.remote.addr = (struct sockaddr *)from;
	path.remote.addrlen = fromlen;
	ngtcp2_pkt_info pi = { 0 };
	int rv = ngtcp2_conn_read_pkt(c->conn, &path, &pi, pkt, len, now_ts());
	if (c->state != QC_OPEN)
		return;
	switch (rv) {
	case 0:
		break;
	case NGTCP2_ERR_DRAINING:
		conn_peer_closed(c);
		return;
	case NGTCP2_ERR_DROP_CONN:
		conn_die(c, "dropped");
		return;
	case NGTCP2_ERR_CRYPTO:
		conn_tls_why(c);
		conn_set_liberr(c, rv);
		break;
	default:
		conn_set_liberr(c, rv);
		break;
	}
	conn_touch(c);
}

/* ---- endpoints ---- */

/* Reads a batch of datagrams from E's socket and hands each on. */
static void on_read(struct ev_loop *loop, ev_io *w, int revents);
/* The socket takes packets again: the kept one first, then the rest. */
static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct quic_endpoint *e = w->data;
	(void)loop;
	(void)revents;
	if (e->blk) {
		ssize_t n = sendto(e->fd, e->blk, e->blklen, 0, (struct sockaddr *)&e->blkto,
				   e->blktolen);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
			return;
		free(e->blk);
		e->blk = NULL;
	}
	ev_io_stop(EV_DEFAULT, &e->wio);
	for (struct quic_conn *c = e->conns; c; c = c->next)
		conn_touch(c);
}

/* Adds E to the list the prepare watcher flushes. */
static void ep_link(struct quic_endpoint *e)
{
	e->next = Q.eps;
	if (e->next)
		e->next->prev = e;
	Q.eps = e;
	if (!Q.started) {
		ev_prepare_init(&Q.prep, on_prepare);
		ev_prepare_start(EV_DEFAULT, &Q.prep);
		Q.started = true;
	}
}

/* A non-blocking close-on-exec UDP socket bound to HOST:PORT (server) or
 * connected to it (client), with *E's local address: fd or -1 (WHY). */
static int ep_socket(struct quic_endpoint *e, const char *host, int port, bool server,
		     struct sockaddr_storage *peer, socklen_t *peerlen, char *why, size_t n)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	char ps[8];
	hints.ai_socktype = SOCK_DGRAM;
	hints.ai_flags = server ? AI_PASSIVE : 0;
	snprintf(ps, sizeof ps, "%d", port);
	int rc = getaddrinfo(host, ps, &hints, &res);
	if (rc != 0) {
		snprintf(why, n, "%s: %s", host, gai_strerror(rc));
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || (server ? bind(fd, res->ai_addr, res->ai_addrlen)
			      : connect(fd, res->ai_addr, res->ai_addrlen)) != 0) {
		snprintf(why, n, "%s:%d: %s", host, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return -1;
	}
	if (peer) {
		memcpy(peer, res->ai_addr, res->ai_addrlen);
		*peerlen = res->ai_addrlen;
	}
	freeaddrinfo(res);
	e->locallen = sizeof e->local;
	getsockname(fd, (struct sockaddr *)&e->local, &e->locallen);
	e->fd = fd;
	ev_io_init(&e->rio, on_read, fd, EV_READ);
	ev_io_init(&e->wio, on_writable, fd, EV_WRITE);
	e->rio.data = e->wio.data = e;
	return fd;
}

/* Sends an Initial CONNECTION_CLOSE (CONNECTION_REFUSED) for HD from SA
 * without keeping any state. */
static void ep_refuse(struct quic_endpoint *e, const ngtcp2_pkt_hd *hd, const struct sockaddr *sa,
		      socklen_t salen, const char *why)
{
	uint8_t buf[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(
		buf, sizeof buf, hd->version, &hd->scid, &hd->dcid, NGTCP2_CONNECTION_REFUSED,
		(const uint8_t *)why, strlen(why));
	char peer[64];
	addr_str(sa, salen, peer, sizeof peer);
	log_info("quic: %s: refused (%s)", peer, why);
	if (n > 0)
		ep_send(e, sa, salen, buf, (size_t)n);
}

/* The server's TLS session for C: 0 or -1. */
static int server_tls(struct quic_endpoint *e, struct quic_conn *c)
{
	if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET |
					 GNUTLS_NO_END_OF_EARLY_DATA) != 0)
		return -1;
	gnutls_datum_t alpn = { (unsigned char *)e->alpn, (unsigned)strlen(e->alpn) };
	if (gnutls_priority_set_direct(c->tls, TLS_PRIORITY, NULL) != 0 ||
	    ngtcp2_crypto_gnutls_configure_server_session(c->tls) != 0 ||
	    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, e->cred) != 0 ||
	    gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0)
		return -1;
	gnutls_session_set_ptr(c->tls, &c->ref);
	ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
	return 0;
}

/* The ngtcp2 side of server connection C for the Initial HD: 0 or -1. The
 * datagram limit is offered only to a user that takes datagrams. */
static int server_conn_init(struct quic_endpoint *e, struct quic_conn *c, const ngtcp2_pkt_hd *hd)
{
	ngtcp2_cid scid;
	scid.datalen = SCID_LEN;
	ngtcp2_callbacks cb;
	ngtcp2_settings st;
	ngtcp2_transport_params p;
	set_callbacks(&cb, true);
	ngtcp2_settings_default(&st);
	st.initial_ts = now_ts();
	set_params(&p, e->o.idle_timeout, e->o.max_streams_bidi, e->o.max_streams_uni,
		   c->ops->datagram ? e->o.max_datagram : 0);
	p.original_dcid = hd->dcid;
	c->odcid = hd->dcid;
	p.stateless_reset_token_present = 1;
	ngtcp2_path path = conn_path(c);
	if (rand_bytes(scid.data, scid.datalen) != 0 ||
	    ngtcp2_crypto_generate_stateless_reset_token(p.stateless_reset_token, e->secret,
							 sizeof e->secret, &scid) != 0 ||
	    ngtcp2_conn_server_new(&c->conn, &hd->scid, &scid, &path, hd->version, &cb, &st, &p,
				   NULL, c) != 0 ||
	    server_tls(e, c) != 0 ||
	    hmap_put(&e->cids, hd->dcid.data, hd->dcid.datalen, c) != 0 ||
	    hmap_put(&e->cids, scid.data, scid.datalen, c) != 0)
		return -1;
	return 0;
}

/* A datagram for no known connection: a new one if it is a client's
 * first Initial and there is room, else nothing. */
static void ep_new_conn(struct quic_endpoint *e, const struct sockaddr *sa, socklen_t salen,
			const uint8_t *pkt, size_t len)
{
	ngtcp2_pkt_hd hd;
	if (ngtcp2_accept(&hd, pkt, len) != 0)
		return;
	if (e->nconns >= e->o.max_conns) {
		ep_refuse(e, &hd, sa, salen, "too many connections");
		return;
	}
	struct quic_conn *c = conn_new(e, sa, salen);
	if (!c) {
		ep_refuse(e, &hd, sa, salen, "out of memory");
		return;
	}
	log_debug("quic: %s: new connection", c->peer_str);
	c->ops = e->accept(e->arg, c, &c->arg);
	if (!c->ops) {
		conn_free(c);
		ep_refuse(e, &hd, sa, salen, "connection refused by the server");
		return;
	}
	if (server_conn_init(e, c, &hd) != 0) {
		ep_refuse(e, &hd, sa, salen, "cannot start");
		conn_die(c, "cannot start");  /* its closed() still comes */
		return;
	}
	conn_read(c, sa, salen, pkt, len);
}

/* One datagram on a server's socket: to its connection by DCID. */
static void ep_dispatch(struct quic_endpoint *e, const struct sockaddr *sa, socklen_t salen,
			const uint8_t *pkt, size_t len)
{
	ngtcp2_version_cid vc;
	if (ngtcp2_pkt_decode_version_cid(&vc, pkt, len, SCID_LEN) != 0)
		return;  /* version negotiation is not offered: v1 only */
	struct quic_conn *c = hmap_get(&e->cids, vc.dcid, vc.dcidlen);
	if (c)
		conn_read(c, sa, salen, pkt, len);
	else
		ep_new_conn(e, sa, salen, pkt, len);
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct quic_endpoint *e = w->data;
	static uint8_t buf[65536];
	(void)loop;
	(void)revents;
	for (int i = 0; i < READ_BATCH; i++) {
		struct sockaddr_storage from;
		struct iovec iov = { buf, sizeof buf };
		struct msghdr msg = { 0 };
		msg.msg_name = &from;
		msg.msg_namelen = sizeof from;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		ssize_t n = recvmsg(e->fd, &msg, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECONNREFUSED && !e->server && e->conns &&
			    !ngtcp2_conn_get_handshake_completed(e->conns->conn)) {
				conn_die(e->conns, "connection refused (nothing listens there)");
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_debug("quic: recvmsg: %s", strerror(errno));
			return;
		}
		if (n == 0)
			continue;
		if (e->server)
			ep_dispatch(e, (struct sockaddr *)&from, msg.msg_namelen, buf, (size_t)n);
		else if (e->conns)
			conn_read(e->conns, (struct sockaddr *)&from, msg.msg_namelen, buf,
				  (size_t)n);
	}
}

/* Frees E itself (its connections are gone). */
static void ep_free_now(struct quic_endpoint *e)
{
	ev_io_stop(EV_DEFAULT, &e->rio);
	ev_io_stop(EV_DEFAULT, &e->wio);
	if (e->fd >= 0)
		close(e->fd);
	if (e->prev)
		e->prev->next = e->next;
	else if (Q.eps == e)
		Q.eps = e->next;
	if (e->next)
		e->next->prev = e->prev;
	if (!Q.eps && Q.started) {
		ev_prepare_stop(EV_DEFAULT, &Q.prep);
		Q.started = false;
	}
	hmap_release(&e->cids);
	if (e->cred)
		gnutls_certificate_free_credentials(e->cred);
	free(e->alpn);
	free(e->blk);
	free(e);
}

/* A new endpoint, not yet linked: NULL when out of memory. */
static struct quic_endpoint *ep_alloc(bool server)
{
	struct quic_endpoint *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->fd = -1;
	e->server = server;
	if (rand_bytes(e->secret, sizeof e->secret) != 0) {
		free(e);
		return NULL;
	}
	return e;
}

struct quic_endpoint *quic_server_new(const char *host, int port, const struct quic_server_opts *o,
				      quic_accept_fn accept, void *arg, char *why, size_t n)
{
	struct quic_endpoint *e = ep_alloc(true);
	if (!e) {
		snprintf(why, n, "out of memory");
		return NULL;
	}
	e->o = *o;
	e->accept = accept;
	e->arg = arg;
	e->alpn = strdup(o->alpn ? o->alpn : "h3");
	int rc;
	if (!e->alpn || gnutls_certificate_allocate_credentials(&e->cred) != 0) {
		snprintf(why, n, "out of memory");
		goto fail;
	}
	rc = gnutls_certificate_set_x509_key_file(e->cred, o->cert_file, o->key_file,
						  GNUTLS_X509_FMT_PEM);
	if (rc < 0) {
		snprintf(why, n, "%s, %s: %s", o->cert_file, o->key_file, gnutls_strerror(rc));
		goto fail;
	}
	if (ep_socket(e, host, port, true, NULL, NULL, why, n) < 0)
		goto fail;
	ev_io_start(EV_DEFAULT, &e->rio);
	ep_link(e);
	log_info("quic: listening on %s:%d", host, quic_endpoint_port(e));
	return e;
fail:
	if (e->cred)
		gnutls_certificate_free_credentials(e->cred);
	if (e->fd >= 0)
		close(e->fd);
	free(e->alpn);
	free(e);
	return NULL;
}

int quic_endpoint_port(const struct quic_endpoint *e)
{
	const struct sockaddr *sa = (const struct sockaddr *)&e->local;
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return ntohs(((const struct sockaddr_in *)sa)->sin_port);
}

void quic_endpoint_free(struct quic_endpoint *e, uint64_t app_code)
{
	if (!e)
		return;
	for (struct quic_conn *c = e->conns; c; c = c->next) {
		if (c->state == QC_OPEN && !c->close_req) {
			ngtcp2_connection_close_error_set_application_error(&c->err, app_code,
									    NULL, 0);
			c->close_req = true;
			snprintf(c->why, sizeof c->why, "endpoint closed");
		}
		conn_start_closing(c);
		conn_die(c, "endpoint closed");
	}
	while (ep_reap_one(e))
		;
	ep_free_now(e);
}

/* ---- the client ---- */

/* GnuTLS, client: the server certificate's SHA-256 must be the pin. */
static int verify_pin(gnutls_session_t s)
{
	ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
	struct quic_conn *c = ref->user_data;
	unsigned n = 0;
	const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
	uint8_t h[32];
	if (!certs || n == 0 || gnutls_hash_fast(GNUTLS_DIG_SHA256, certs[0].data, certs[0].size,
						 h) != 0) {
		snprintf(c->why, sizeof c->why, "no server certificate");
		return -1;
	}
	uint8_t diff = 0;
	for (size_t i = 0; i < sizeof h; i++)  /* constant time */
		diff |= (uint8_t)(h[i] ^ c->pin[i]);
	if (diff) {
		snprintf(c->why, sizeof c->why, "server certificate does not match the pin");
		return -1;
	}
	return 0;
}

/* The client's TLS session for C: 0 or -1 (WHY). */
static int client_tls(struct quic_conn *c, const struct quic_client_opts *o, char *why, size_t n)
{
	int rc = gnutls_certificate_allocate_credentials(&c->cred);
	if (rc == 0 && !o->pin)
		rc = o->ca_file ? gnutls_certificate_set_x509_trust_file(c->cred, o->ca_file,
									 GNUTLS_X509_FMT_PEM)
				: gnutls_certificate_set_x509_system_trust(c->cred);
	if (rc < 0) {
		snprintf(why, n, "%s: %s", o->ca_file ? o->ca_file : "system CAs", gnutls_strerror(rc));
		return -1;
	}
	const char *alpn = o->alpn ? o->alpn : "h3";
	gnutls_datum_t ad = { (unsigned char *)alpn, (unsigned)strlen(alpn) };
	if (gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA) != 0 ||
	    gnutls_priority_set_direct(c->tls, TLS_PRIORITY, NULL) != 0 ||
	    ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
	    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred) != 0 ||
	    gnutls_alpn_set_protocols(c->tls, &ad, 1, GNUTLS_ALPN_MANDATORY) != 0) {
		snprintf(why, n, "TLS set-up failed");
		return -1;
	}
	const char *name = o->sni ? o->sni : o->host;
	unsigned char tmp[16];
	bool numeric = inet_pton(AF_INET, name, tmp) == 1 || inet_pton(AF_INET6, name, tmp) == 1;
	if (!numeric)
		gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, name, strlen(name));
	if (o->pin) {
		memcpy(c->pin, o->pin, sizeof c->pin);
		gnutls_session_set_verify_function(c->tls, verify_pin);
	} else {
		gnutls_session_set_verify_cert(c->tls, name, 0);
	}
	gnutls_session_set_ptr(c->tls, &c->ref);
	ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
	return 0;
}

/* The client's ngtcp2 connection for C to PEER: 0 or -1. */
static int client_quic(struct quic_conn *c, const struct quic_client_opts *o)
{
	ngtcp2_cid dcid, scid;
	dcid.datalen = SCID_LEN;
	scid.datalen = SCID_LEN;
	if (rand_bytes(dcid.data, dcid.datalen) != 0 || rand_bytes(scid.data, scid.datalen) != 0)
		return -1;
	ngtcp2_callbacks cb;
	ngtcp2_settings st;
	ngtcp2_transport_params p;
	set_callbacks(&cb, false);
	ngtcp2_settings_default(&st);
	st.initial_ts = now_ts();
	set_params(&p, o->idle_timeout, o->max_streams_bidi, o->max_streams_uni,
		   c->ops->datagram ? o->max_datagram : 0);
	ngtcp2_path path = conn_path(c);
	if (ngtcp2_conn_client_new(&c->conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &st,
				   &p, NULL, c) != 0)
		return -1;
	return 0;
}

struct quic_conn *quic_client_connect(const struct quic_client_opts *o,
				      const struct quic_conn_ops *ops, void *arg, char *why,
				      size_t n)
{
	struct quic_endpoint *e = ep_alloc(false);
	if (!e) {
		snprintf(why, n, "out of memory");
		return NULL;
	}
	struct sockaddr_storage peer;
	socklen_t peerlen = 0;
	if (ep_socket(e, o->host, o->port, false, &peer, &peerlen, why, n) < 0) {
		free(e);
		return NULL;
	}
	ep_link(e);
	struct quic_conn *c = conn_new(e, (struct sockaddr *)&peer, peerlen);
	if (!c) {
		snprintf(why, n, "out of memory");
		ep_free_now(e);
		return NULL;
	}
	c->ops = ops;
	c->arg = arg;
	if (client_quic(c, o) != 0) {
		snprintf(why, n, "QUIC set-up failed");
		goto fail;
	}
	if (client_tls(c, o, why, n) != 0)
		goto fail;
	ev_io_start(EV_DEFAULT, &e->rio);
	conn_touch(c);  /* the first Initial goes before the loop sleeps */
	log_debug("quic: connecting to %s", c->peer_str);
	return c;
fail:
	conn_free(c);
	ep_free_now(e);
	return NULL;
}

/* ---- the user's calls ---- */

int quic_stream_open(struct quic_conn *c, bool bidi, int64_t *sid)
{
	if (!c->conn || c->state != QC_OPEN || c->close_req)
		return -1;
	int64_t id;
	int rv = bidi ? ngtcp2_conn_open_bidi_stream(c->conn, &id, NULL)
		      : ngtcp2_conn_open_uni_stream(c->conn, &id, NULL);
	if (rv != 0)
		return -1;
	struct qstream *s = stream_new(c, id);
	if (!s) {
		ngtcp2_conn_shutdown_stream(c->conn, id, 0);
		return -1;
	}
	ngtcp2_conn_set_stream_user_data(c->conn, id, s);
	*sid = id;
	return 0;
}

int quic_stream_write(struct quic_conn *c, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
	struct qstream *s = stream_find(c, sid);
	if (!s || !c->conn || c->state != QC_OPEN || s->fin_queued || s->wclosed)
		return -1;
	if (!ngtcp2_is_bidi_stream(sid) && !ngtcp2_conn_is_local_stream(c->conn, sid))
		return -1;  /* the peer's uni stream: ours to read only */
	if (len && stream_append(s, data, len) != 0)
		return -1;
	if (fin)
		s->fin_queued = true;
	if (s->total - s->acked >= QUIC_STREAM_LOW_WATER)
		s->high = true;
	conn_touch(c);
	return 0;
}

size_t quic_stream_queued(const struct quic_conn *c, int64_t sid)
{
	const struct qstream *s = stream_find(c, sid);
	return s ? (size_t)(s->total - s->acked) : 0;
}

void quic_stream_abort(struct quic_conn *c, int64_t sid, uint64_t app_code)
{
	struct qstream *s = stream_find(c, sid);
	if (!s || c->state != QC_OPEN)
		return;
	s->wclosed = true;  /* the chunks stay until the stream is freed */
	ngtcp2_conn_shutdown_stream(c->conn, sid, app_code);
	conn_touch(c);
}

void quic_stream_stop_reading(struct quic_conn *c, int64_t sid, uint64_t app_code)
{
	if (c->state != QC_OPEN || !stream_find(c, sid))
		return;
	ngtcp2_conn_shutdown_stream_read(c->conn, sid, app_code);
	conn_touch(c);
}

size_t quic_datagram_max(const struct quic_conn *c)
{
	if (!c->conn || c->state != QC_OPEN)
		return 0;
	const ngtcp2_transport_params *p = ngtcp2_conn_get_remote_transport_params(c->conn);
	if (!p || p->max_datagram_frame_size == 0)
		return 0;
	/* the frame (type, length varint) and a short header packet must fit
	 * in one UDP datagram: 1 + 20 (CID) + 4 (number) + 16 (AEAD tag) */
	size_t pkt = ngtcp2_conn_get_path_max_tx_udp_payload_size(c->conn);
	size_t room = pkt > 64 ? pkt - 1 - 20 - 4 - 16 - 1 - 2 : 0;
	uint64_t frame = p->max_datagram_frame_size;
	uint64_t by_frame = frame < 3 ? 0 : frame - 3 < 16384 ? frame - 3 : frame - 5;
	return by_frame < room ? (size_t)by_frame : room;
}

int quic_datagram_send(struct quic_conn *c, const uint8_t *data, size_t len)
{
	if (c->state != QC_OPEN || c->close_req || len > quic_datagram_max(c) ||
	    c->ndg >= DGRAM_QUEUE_MAX)
		return -1;
	struct dgram *d = malloc(sizeof *d + len);
	if (!d)
		return -1;
	d->next = NULL;
	d->len = len;
	memcpy(d->data, data, len);
	if (c->dg_tail)
		c->dg_tail->next = d;
	else
		c->dg_head = d;
	c->dg_tail = d;
	c->ndg++;
	conn_touch(c);
	return 0;
}

void quic_conn_close(struct quic_conn *c, uint64_t app_code, const char *reason)
{
	if (c->state != QC_OPEN || c->close_req)
		return;
	const char *r = reason ? reason : "";
	size_t rl = strlen(r);
	if (rl > 512)
		rl = 512;
	c->close_reason = strndup(r, rl);
	ngtcp2_connection_close_error_set_application_error(
		&c->err, app_code, (const uint8_t *)c->close_reason, c->close_reason ? rl : 0);
	c->close_req = true;
	snprintf(c->why, sizeof c->why, "closed: %s", r);
	conn_touch(c);
}

const char *quic_conn_peer(const struct quic_conn *c)
{
	return c->peer_str;
}

void quic_conn_set_arg(struct quic_conn *c, void *arg)
{
	c->arg = arg;
}

void quic_conn_keep_alive(struct quic_conn *c, double seconds)
{
	if (!c->conn)
		return;
	ngtcp2_conn_set_keep_alive_timeout(c->conn, seconds > 0 ?
		(ngtcp2_duration)(seconds * (double)NGTCP2_SECONDS) : 0);
	conn_touch(c);   /* the timer is armed again at the flush */
}
