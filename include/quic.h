/*
 * quic.h - QUIC connections (RFC 9000) with TLS 1.3, on the loop: ngtcp2
 * 0.12 with its GnuTLS crypto helper, one non-blocking UDP socket per
 * endpoint watched by libev, each connection's expiry on an ev_timer. No
 * thread, no blocking call.
 *
 * An endpoint is a server (many connections on one socket, told to the
 * accept function) or one client connection. The layer knows nothing of
 * HTTP/3: it moves stream bytes, datagrams (RFC 9221) and stream and
 * connection closes between ngtcp2 and its user's callbacks.
 *
 * Ownership: bytes handed to quic_stream_write are copied into the
 * stream's send queue; bytes handed to callbacks are borrowed for the
 * call. A connection is freed by the layer after its closed callback
 * returns; no call on it is allowed after that.
 *
 * Reentrancy: callbacks are made from the loop (a packet read, a timer),
 * never from inside a quic_* call of the user; calls made from a callback
 * (writes, closes) take effect when the callback returns: output is sent
 * before the loop sleeps.
 */
#ifndef MCPC_QUIC_H
#define MCPC_QUIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct quic_endpoint;
struct quic_conn;

/* What a connection tells its user; ARG is the connection's user pointer. */
struct quic_conn_ops {
	/* Handshake complete (both sides). */
	void (*ready)(void *arg, struct quic_conn *c);
	/* Stream SID's next bytes, in order (LEN may be 0 with FIN); FIN: the
	 * peer ended its side. Flow control credit is given back once this
	 * returns. */
	void (*stream_data)(void *arg, struct quic_conn *c, int64_t sid, const uint8_t *data,
			    size_t len, bool fin);
	/* The peer reset stream SID (RESET_STREAM) or asked us to stop sending
	 * on it (STOP_SENDING), with APP_CODE; RESET: which one. May be NULL. */
	void (*stream_reset)(void *arg, struct quic_conn *c, int64_t sid, uint64_t app_code,
			     bool reset);
	/* Stream SID is closed in both directions and forgotten. May be NULL. */
	void (*stream_close)(void *arg, struct quic_conn *c, int64_t sid);
	/* What was queued on SID has gone below QUIC_STREAM_LOW_WATER again.
	 * May be NULL. */
	void (*writable)(void *arg, struct quic_conn *c, int64_t sid);
	/* One DATAGRAM frame's payload. May be NULL (then the endpoint does
	 * not offer datagrams). */
	void (*datagram)(void *arg, struct quic_conn *c, const uint8_t *data, size_t len);
	/* The connection is gone: REASON (static or borrowed for the call)
	 * says why. C is freed once this returns. */
	void (*closed)(void *arg, struct quic_conn *c, const char *reason);
};

#define QUIC_STREAM_LOW_WATER (256 * 1024)

struct quic_server_opts {
	const char *cert_file;     /* PEM certificate chain */
	const char *key_file;      /* PEM private key */
	const char *alpn;          /* e.g. "h3" */
	double idle_timeout;       /* seconds */
	size_t max_conns;          /* beyond it new connections are refused */
	uint64_t max_streams_bidi; /* the peer may open at once */
	uint64_t max_streams_uni;
	size_t max_datagram;       /* largest DATAGRAM frame taken; 0: none */
};

/*
 * A new connection on the server: returns the ops for it and sets *ARG,
 * or returns NULL to refuse it (it is closed at once).
 */
typedef const struct quic_conn_ops *(*quic_accept_fn)(void *arg, struct quic_conn *c,
						      void **conn_arg);

/*
 * A server listening on HOST:PORT (UDP; PORT 0 picks one). NULL with WHY
 * (N bytes) when the address, the certificate or the key cannot be used.
 */
struct quic_endpoint *quic_server_new(const char *host, int port, const struct quic_server_opts *o,
				      quic_accept_fn accept, void *arg, char *why, size_t n);

/* The port the endpoint's socket is bound to. */
int quic_endpoint_port(const struct quic_endpoint *e);

/*
 * Closes every connection (CONNECTION_CLOSE with APP_CODE; their closed
 * callbacks run) and frees the endpoint.
 */
void quic_endpoint_free(struct quic_endpoint *e, uint64_t app_code);

struct quic_client_opts {
	const char *host;          /* numeric address or name (resolved before
				    * the call: give a numeric one on the loop) */
	int port;
	const char *sni;           /* server name; NULL: HOST */
	const char *alpn;
	const uint8_t *pin;        /* SHA-256 of the server certificate's DER
				    * (32 bytes): accepted whatever signs it */
	const char *ca_file;       /* else verified against these CAs (NULL:
				    * the system's) */
	double idle_timeout;
	size_t max_datagram;
	uint64_t max_streams_bidi;
	uint64_t max_streams_uni;
};

/*
 * A client connection (its own endpoint): OPS tell ARG. NULL with WHY
 * when it cannot start; later failures (handshake, certificate) come as
 * closed().
 */
struct quic_conn *quic_client_connect(const struct quic_client_opts *o,
				      const struct quic_conn_ops *ops, void *arg, char *why,
				      size_t n);

/* Opens a stream of ours: 0 with *SID, or -1 when the peer's stream limit
 * is reached for now. */
int quic_stream_open(struct quic_conn *c, bool bidi, int64_t *sid);

/*
 * Queues LEN bytes of DATA (copied) on SID; FIN ends our side after them.
 * Sent as flow control allows. 0, or -1 (unknown or ended stream, out of
 * memory).
 */
int quic_stream_write(struct quic_conn *c, int64_t sid, const uint8_t *data, size_t len,
		      bool fin);

/* Bytes queued on SID that the peer has not acknowledged yet (0 for an
 * unknown stream). */
size_t quic_stream_queued(const struct quic_conn *c, int64_t sid);

/* Aborts SID both ways: RESET_STREAM and STOP_SENDING with APP_CODE;
 * what was queued is dropped. */
void quic_stream_abort(struct quic_conn *c, int64_t sid, uint64_t app_code);

/* Stops reading SID only (STOP_SENDING with APP_CODE). */
void quic_stream_stop_reading(struct quic_conn *c, int64_t sid, uint64_t app_code);

/* Sends one DATAGRAM frame (unreliable: may be lost, never queued for
 * long). 0, or -1 when the peer takes no datagrams, LEN exceeds what it
 * takes, or there is no room now. */
int quic_datagram_send(struct quic_conn *c, const uint8_t *data, size_t len);

/* The largest datagram payload the peer takes now (0: none). */
size_t quic_datagram_max(const struct quic_conn *c);

/* Closes the connection with application error APP_CODE and REASON
 * (copied); closed() follows from the loop. */
void quic_conn_close(struct quic_conn *c, uint64_t app_code, const char *reason);

/* The peer's address as "ip:port" (static per connection). */
const char *quic_conn_peer(const struct quic_conn *c);

/*
 * PINGs after C has been quiet for SECONDS (0: none, the default): while
 * work is open on a connection whose peer may time out sooner than we do
 * (a slow backend behind a quiet stream). A peer that is gone does not
 * acknowledge them, so the idle timeout still ends it.
 */
void quic_conn_keep_alive(struct quic_conn *c, double seconds);

/* Replaces the connection's user pointer. */
void quic_conn_set_arg(struct quic_conn *c, void *arg);

#endif
