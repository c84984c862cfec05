/*
 * test_jscan.c - unit tests for src/core/jscan.c, the allocation-free
 * scanner the fast path trusts: the spans it records, everything it
 * declines, and that it never reads a byte past the length it is given.
 *
 * Messages are written with ' for " so that they read as JSON; scan()
 * turns them back. Every scan copies its input flush against a PROT_NONE
 * page, so an over-read faults in any build, not only under ASan.
 *
 * Tests named test_regression_* pin down defects found while writing this suite:
 * they fail until jscan.c is fixed (see the comment above each).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "jscan.h"
#include "rpc.h"

#define GUARD_CAP (256 * 1024)

static char *guard_end;   /* first byte of the PROT_NONE page */

/* Maps the scan area and the inaccessible page right after it. */
static int guard_setup(void **state)
{
	(void)state;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t cap = (GUARD_CAP + page - 1) / page * page;
	char *base = mmap(NULL, cap + page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED || mprotect(base + cap, page, PROT_NONE) != 0)
		return -1;
	guard_end = base + cap;
	return 0;
}

/* Scans the N bytes at P copied so that they end at the guard page. */
static bool scan_raw(const char *p, size_t n, struct jscan *js)
{
	assert_true(n <= GUARD_CAP);
	char *at = guard_end - n;
	memmove(at, p, n);
	memset(js, 0xA5, sizeof *js);   /* the scanner must reset every field */
	return jscan_message(at, n, js);
}

/* malloc that does not return NULL. */
static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	return p;
}

/* A malloc'd copy of TEXT with each ' turned into ". */
static char *unq(const char *text)
{
	char *s = strcpy(xmalloc(strlen(text) + 1), text);
	for (char *c = s; *c; c++)
		if (*c == '\'')
			*c = '"';
	return s;
}

/* Scans TEXT (' for "); spans stay valid until the next scan. */
static bool scan(const char *text, struct jscan *js)
{
	char *s = unq(text);
	bool ok = scan_raw(s, strlen(s), js);
	free(s);
	return ok;
}

/* Fails unless SP holds exactly WANT (' for "). */
static void span_is(struct jspan sp, const char *want, const char *file, int line)
{
	size_t n = strlen(want), i = 0;
	if (sp.p && sp.n == n)
		for (i = 0; i < n && sp.p[i] == (want[i] == '\'' ? '"' : want[i]); i++)
			;
	if (sp.p && sp.n == n && i == n)
		return;
	if (sp.p)
		print_error("span is [%.*s] (%zu bytes), expected [%s]\n",
			    (int)sp.n, sp.p, sp.n, want);
	else
		print_error("span is absent, expected [%s]\n", want);
	_fail(file, line);
}

#define assert_span(sp, want) span_is((sp), (want), __FILE__, __LINE__)
#define assert_absent(sp) assert_null((sp).p)

/* TEXT scans as a valid message. */
#define assert_accepted(text) do { \
	struct jscan js_; \
	assert_true(scan((text), &js_)); \
} while (0)

/* TEXT is declined (the slow path takes it). */
#define assert_declined(text) do { \
	struct jscan js_; \
	assert_false(scan((text), &js_)); \
} while (0)

/* Asserts every params-level span of JS is absent. */
static void assert_no_params_spans(const struct jscan *js)
{
	assert_absent(js->token);
	assert_absent(js->request_id);
	assert_absent(js->name);
	assert_absent(js->uri);
	assert_absent(js->meta);
	assert_false(js->subject_escaped);
}

/* HEAD, then LEVELS nested arrays (or {'a': objects) around 1, then TAIL. */
static char *nest(const char *head, int levels, bool objects, const char *tail)
{
	size_t n = strlen(head) + strlen(tail) + (size_t)levels * 6 + 2;
	char *s = xmalloc(n), *p = s;
	p += sprintf(p, "%s", head);
	for (int i = 0; i < levels; i++)
		p += sprintf(p, "%s", objects ? "{'a':" : "[");
	*p++ = '1';
	for (int i = 0; i < levels; i++)
		*p++ = objects ? '}' : ']';
	sprintf(p, "%s", tail);
	return s;
}

/* Scans HEAD + LEVELS containers + TAIL. */
static bool scan_nested(const char *head, int levels, bool objects, const char *tail)
{
	struct jscan js;
	char *s = nest(head, levels, objects, tail);
	bool ok = scan(s, &js);
	free(s);
	return ok;
}

/*
 * Scans [P, P+N) in a child, ending at the guard page: 0 when it declined,
 * 1 when it accepted, -1 when it read past the end (the child faulted or
 * the sanitizer stopped it).
 */
static int scan_in_child(const char *p, size_t n)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct jscan js;
		signal(SIGSEGV, SIG_DFL);   /* not cmocka's handler: die */
		signal(SIGBUS, SIG_DFL);
		_exit(scan_raw(p, n, &js) ? 3 : 0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
		return 1;
	return -1;
}

/* Number of prefixes of TEXT (' for ") that are accepted or read past their end. */
static int bad_prefixes(const char *text)
{
	char *s = unq(text);
	size_t n = strlen(s);
	int bad = 0;
	for (size_t len = 0; len < n; len++) {
		int r = scan_in_child(s, len);
		if (r == 0)
			continue;
		print_message("prefix of %zu bytes %s: %.*s\n", len,
			      r < 0 ? "READ PAST ITS END" : "accepted", (int)len, s);
		bad++;
	}
	free(s);
	return bad;
}

/* ---- requests ---- */

/* A tools/call with everything routing reads: each span exactly. */
static void test_request_all_spans(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':7,'method':'tools/call','params':{"
			 "'name':'echo','arguments':{'text':'hi','n':[1,2]},"
			 "'_meta':{'progressToken':'tok-1','trace':{'k':[true,null]}}}}", &js));
	assert_span(js.id, "7");
	assert_span(js.method, "tools/call");
	assert_span(js.name, "echo");
	assert_span(js.token, "'tok-1'");
	assert_span(js.meta, "{'progressToken':'tok-1','trace':{'k':[true,null]}}");
	assert_absent(js.uri);
	assert_absent(js.request_id);
	assert_false(js.id_is_string);
	assert_true(js.has_jsonrpc);
	assert_true(js.has_params);
	assert_false(js.has_result);
	assert_false(js.has_error);
	assert_false(js.subject_escaped);
	assert_false(js.is_error);
}

/* A string id: the span is the raw text, quotes included. */
static void test_request_string_id(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':'abc-1','method':'ping'}", &js));
	assert_span(js.id, "'abc-1'");
	assert_true(js.id_is_string);
	assert_span(js.method, "ping");
	assert_false(js.has_params);
	assert_no_params_spans(&js);
}

/* A negative id keeps its sign. */
static void test_request_negative_id(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':-42,'method':'ping'}", &js));
	assert_span(js.id, "-42");
	assert_false(js.id_is_string);
	assert_int_equal(js.id_int, -42);
}

/* An integer id's value comes with the scan, up to 18 digits. */
static void test_request_id_value(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':7,'method':'ping'}", &js));
	assert_int_equal(js.id_int, 7);
	assert_true(scan("{'id':999999999999999999,'jsonrpc':'2.0','method':'ping'}", &js));
	assert_true(js.id_int == 999999999999999999LL);
	assert_true(scan("{'jsonrpc':'2.0','id':-0,'result':{}}", &js));
	assert_int_equal(js.id_int, 0);
	assert_false(scan("{'jsonrpc':'2.0','id':1000000000000000000,'method':'ping'}", &js));
	assert_false(scan("{'jsonrpc':'2.0','id':7.5,'method':'ping'}", &js));
	assert_false(scan("{'jsonrpc':'2.0','id':7e1,'method':'ping'}", &js));
}

/*
 * Integer ids of every length from 1 to 18 digits, signed or not, read the
 * same whether eight bytes or fewer follow their first digit (read a word
 * at a time, or a digit at a time) and whether they come first or last.
 */
static void test_id_every_length(void **state)
{
	static const char *const digits[] = {
		"123456789012345678", "999999999999999999", "100000000000000000",
		"908070605040302010", "111111111111111111",
	};
	(void)state;
	for (size_t d = 0; d < sizeof digits / sizeof digits[0]; d++) {
		for (size_t len = 1; len <= 18; len++) {
			for (int neg = 0; neg < 2; neg++) {
				char id[24], text[128];
				snprintf(id, sizeof id, "%s%.*s", neg ? "-" : "", (int)len, digits[d]);
				long long want = strtoll(id, NULL, 10);
				const char *forms[] = { "{'jsonrpc':'2.0','id':%s,'method':'tools/call'}",
							"{'jsonrpc':'2.0','method':'m','id':%s}",
							"{'id':%s,'jsonrpc':'2.0','result':{}}" };
				for (size_t f = 0; f < 3; f++) {
					struct jscan js;
					snprintf(text, sizeof text, forms[f], id);
					assert_true(scan(text, &js));
					assert_false(js.id_is_string);
					assert_true(js.id_int == want);
					assert_int_equal(js.id.n, strlen(id));
				}
			}
		}
	}
}

/* Id 0 is an id like any other. */
static void test_request_zero_id(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':0,'method':'ping'}", &js));
	assert_span(js.id, "0");
	assert_false(js.id_is_string);
}

/* An empty string id is a present, empty-contents id. */
static void test_request_empty_string_id(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':'','method':'ping'}", &js));
	assert_span(js.id, "''");
	assert_true(js.id_is_string);
}

/* 18 digits is the longest integer accepted, signed or not. */
static void test_request_18_digit_id(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':999999999999999999,'method':'m'}", &js));
	assert_span(js.id, "999999999999999999");
	assert_true(scan("{'jsonrpc':'2.0','id':-999999999999999999,'method':'m'}", &js));
	assert_span(js.id, "-999999999999999999");
}

/* An integer progress token is recorded raw. */
static void test_request_integer_token(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/list',"
			 "'params':{'_meta':{'progressToken':55}}}", &js));
	assert_span(js.token, "55");
	assert_span(js.meta, "{'progressToken':55}");
	assert_absent(js.name);
}

/* _meta without a progress token: the meta span, no token. */
static void test_request_meta_without_token(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/list',"
			 "'params':{'_meta':{'user':'u1'}}}", &js));
	assert_span(js.meta, "{'user':'u1'}");
	assert_absent(js.token);
}

/* An empty _meta object is still a meta span. */
static void test_request_empty_meta(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':{}}}", &js));
	assert_span(js.meta, "{}");
	assert_absent(js.token);
}

/* _meta that is not an object is an ordinary member: no meta span. */
static void test_request_meta_not_object(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':5}}", &js));
	assert_absent(js.meta);
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':null}}", &js));
	assert_absent(js.meta);
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m',"
			 "'params':{'_meta':[{'progressToken':1}]}}", &js));
	assert_absent(js.meta);
	assert_absent(js.token);
}

/* No params at all: has_params false and no params spans. */
static void test_request_without_params(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'method':'tools/list'}", &js));
	assert_false(js.has_params);
	assert_no_params_spans(&js);
}

/* Empty params object. */
static void test_request_empty_params(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'method':'tools/list','params':{}}", &js));
	assert_true(js.has_params);
	assert_no_params_spans(&js);
}

/* Params as an array is accepted, with nothing recorded inside it. */
static void test_request_params_array(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'method':'m',"
			 "'params':[{'name':'x','_meta':{'progressToken':1}}]}", &js));
	assert_true(js.has_params);
	assert_no_params_spans(&js);
}

/* Params that is neither object nor array goes to the slow path. */
static void test_decline_params_scalar(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':3,'method':'m','params':null}");
	assert_declined("{'jsonrpc':'2.0','id':3,'method':'m','params':'x'}");
	assert_declined("{'jsonrpc':'2.0','id':3,'method':'m','params':1}");
	assert_declined("{'jsonrpc':'2.0','id':3,'method':'m','params':true}");
}

/* resources/read: the uri span, no name. */
static void test_resources_read_uri(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':4,'method':'resources/read',"
			 "'params':{'uri':'file:///tmp/a.txt'}}", &js));
	assert_span(js.method, "resources/read");
	assert_span(js.uri, "file:///tmp/a.txt");
	assert_absent(js.name);
	assert_false(js.subject_escaped);
}

/* A name with escapes: subject_escaped, the span the raw contents. */
static void test_name_escaped(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/call',"
			 "'params':{'name':'a\\'b\\u00e9\\n'}}", &js));
	assert_span(js.name, "a\\'b\\u00e9\\n");
	assert_true(js.subject_escaped);
}

/* A uri with escapes sets subject_escaped the same way. */
static void test_uri_escaped(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'resources/read',"
			 "'params':{'uri':'file:\\/\\/x'}}", &js));
	assert_span(js.uri, "file:\\/\\/x");
	assert_true(js.subject_escaped);
}

/* Escapes elsewhere in params do not make the subject escaped. */
static void test_escape_elsewhere_not_subject(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/call',"
			 "'params':{'name':'t','arguments':{'s':'a\\nb'}}}", &js));
	assert_span(js.name, "t");
	assert_false(js.subject_escaped);
}

/* An empty name is a present, empty span. */
static void test_name_empty(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':''}}",
			 &js));
	assert_span(js.name, "");
}

/* A name that is not a string is no name (and no reason to decline). */
static void test_name_not_string(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':42}}",
			 &js));
	assert_absent(js.name);
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/call',"
			 "'params':{'name':{'x':'y'},'uri':['u']}}", &js));
	assert_absent(js.name);
	assert_absent(js.uri);
	assert_false(js.subject_escaped);
}

/* Only direct members of params count: deeper name/uri/token are data. */
static void test_deeper_members_ignored(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{"
			 "'arguments':{'name':'n','uri':'u','progressToken':1,'requestId':2,"
			 "'_meta':{'progressToken':3}}}}", &js));
	assert_no_params_spans(&js);
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m','name':'n','uri':'u',"
			 "'progressToken':1,'_meta':{'progressToken':2}}", &js));
	assert_no_params_spans(&js);
}

/* Escaped keys deeper than params' own members are fine. */
static void test_escaped_key_in_arguments(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'tools/call',"
			 "'params':{'name':'t','arguments':{'k\\u0065y':1,'\\n':2}}}", &js));
	assert_span(js.name, "t");
}

/* ---- notifications ---- */

/* notifications/progress with a string token at params level. */
static void test_progress_string_token(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','method':'notifications/progress',"
			 "'params':{'progressToken':'abc','progress':1,'total':10}}", &js));
	assert_span(js.method, "notifications/progress");
	assert_span(js.token, "'abc'");
	assert_absent(js.id);
	assert_absent(js.meta);
}

/* notifications/progress with an integer token. */
static void test_progress_integer_token(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','method':'notifications/progress',"
			 "'params':{'progress':0.5,'progressToken':12}}", &js));
	assert_span(js.token, "12");
	assert_absent(js.id);
}

/* notifications/cancelled: requestId, integer or string. */
static void test_cancelled_request_id(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','method':'notifications/cancelled',"
			 "'params':{'requestId':3,'reason':'user'}}", &js));
	assert_span(js.request_id, "3");
	assert_absent(js.token);
	assert_true(scan("{'jsonrpc':'2.0','method':'notifications/cancelled',"
			 "'params':{'requestId':'r-1'}}", &js));
	assert_span(js.request_id, "'r-1'");
}

/* A notification without params. */
static void test_notification_without_params(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','method':'notifications/initialized'}", &js));
	assert_span(js.method, "notifications/initialized");
	assert_absent(js.id);
	assert_false(js.has_params);
	assert_no_params_spans(&js);
}

/* ---- responses ---- */

/* A result object: has_result, no method, not an error. */
static void test_response_result_object(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'content':[{'type':'text',"
			 "'text':'ok'}]}}", &js));
	assert_span(js.id, "3");
	assert_absent(js.method);
	assert_true(js.has_result);
	assert_false(js.has_error);
	assert_false(js.has_params);
	assert_false(js.is_error);
	assert_false(js.id_is_string);
}

/* A response with a string id. */
static void test_response_string_id(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':'s1','result':{}}", &js));
	assert_span(js.id, "'s1'");
	assert_true(js.id_is_string);
}

/* result.isError true sets is_error. */
static void test_response_is_error_true(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'content':[],'isError':true}}",
			 &js));
	assert_true(js.is_error);
	assert_true(js.has_result);
}

/* result.isError false, or anything but the literal true, does not. */
static void test_response_is_error_not_true(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'isError':false}}", &js));
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'isError':'true'}}", &js));
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'isError':1}}", &js));
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'isError':null}}", &js));
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'isError':[true]}}", &js));
	assert_false(js.is_error);
}

/* A result that is not an object is accepted, never an error. */
static void test_response_result_not_object(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':[{'isError':true}]}", &js));
	assert_true(js.has_result);
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':null}", &js));
	assert_true(js.has_result);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':'isError'}", &js));
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':true}", &js));
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':0}", &js));
}

/* isError deeper inside result is content, not the tool's verdict. */
static void test_response_nested_is_error_ignored(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{'content':[{'isError':true}],"
			 "'structuredContent':{'isError':true},'x':{'y':{'isError':true}}}}", &js));
	assert_false(js.is_error);
	assert_true(scan("{'jsonrpc':'2.0','id':3,'isError':true,'result':{}}", &js));
	assert_false(js.is_error);
}

/* Params in a response are scanned like any params. */
static void test_response_with_params(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':3,'result':{},'params':{'name':'n'}}", &js));
	assert_true(js.has_params);
	assert_span(js.name, "n");
}

/* ---- layout ---- */

/* Spaces, tabs, CR and LF between every token, and around the object. */
static void test_whitespace_everywhere(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan(" \t\r\n{ 'jsonrpc'\t:\r\n'2.0' ,\n'id' : 5 ,'method'\r:\t'tools/call',"
			 "\n'params' : {\t'name' :\n'x' , '_meta' : { 'progressToken' :\t9 } ,"
			 " 'arguments' : [ 1 , { } , [ ] , { 'a' : [ true , false , null ] } ] }"
			 "\r\n}\n\t ", &js));
	assert_span(js.id, "5");
	assert_span(js.method, "tools/call");
	assert_span(js.name, "x");
	assert_span(js.token, "9");
	assert_span(js.meta, "{ 'progressToken' :\t9 }");
	assert_true(js.has_params);
	assert_true(js.lines);
}

/* Compact input, spaces and tabs, escaped \n and \r in strings: no raw line break. */
static void test_lines_only_for_raw_breaks(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m'}", &js));
	assert_false(js.lines);
	assert_true(scan(" {\t'jsonrpc' : '2.0' ,'id':1,'method':'m' } \t", &js));
	assert_false(js.lines);
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m','params':{'t':'a\\nb\\r\\n'}}", &js));
	assert_false(js.lines);
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m'}\n", &js));
	assert_true(js.lines);
	assert_true(scan("\r{'jsonrpc':'2.0','id':1,'method':'m'}", &js));
	assert_true(js.lines);
}

/* True when [A, A+AN) and [B, B+BN) are the same text but for white space. */
static bool same_but_ws(const char *a, size_t an, const char *b, size_t bn)
{
	size_t i = 0, j = 0;
	for (;;) {
		while (i < an && strchr(" \t\r\n", a[i]))
			i++;
		while (j < bn && strchr(" \t\r\n", b[j]))
			j++;
		if (i == an || j == bn)
			return i == an && j == bn;
		if (a[i++] != b[j++])
			return false;
	}
}

/* Fails unless spans A and B are both absent or hold the same but for white space. */
static void same_span(struct jspan a, struct jspan b, const char *what, const char *text)
{
	if (!a.p && !b.p)
		return;
	if (!a.p || !b.p || !same_but_ws(a.p, a.n, b.p, b.n))
		fail_msg("%s differs with white space added: %s", what, text);
}

/* True when white space may go at offset I of the compact JSON S (N bytes). */
static bool ws_place(const char *s, size_t n, size_t i)
{
	size_t quotes = 0;
	for (size_t k = 0; k < i; k++)
		quotes += s[k] == '"';   /* (no escaped quotes in these messages) */
	if (quotes % 2)
		return false;   /* inside a string */
	return i == 0 || i == n || strchr("{}[],:", s[i - 1]) || strchr("{}[],:", s[i]);
}

/*
 * A raw CR, LF or CRLF (and runs of them) at every place white space may
 * go: the scan accepts, says "lines", and finds what it finds in the
 * compact message. A pretty-printing client sends such messages.
 */
static void test_lines_every_position(void **state)
{
	(void)state;
	static const char *const msgs[] = {
		"{'jsonrpc':'2.0','id':3,'method':'tools/call','params':{'name':'echo',"
			"'_meta':{'progressToken':7},'arguments':{'a':[1,true,null,{'b':'x y'}]}}}",
		"{'id':'r','result':{'content':[],'isError':true},'jsonrpc':'2.0'}",
		"{'jsonrpc':'2.0','method':'notifications/cancelled','params':{'requestId':12}}",
		"{'jsonrpc':'2.0','method':'notifications/progress','params':{'progressToken':'p','progress':1}}",
		"{'jsonrpc':'2.0','id':5,'method':'resources/read','params':{'uri':'u:1'}}",
	};
	static const char *const breaks[] = { "\n", "\r", "\r\n", "\n\n", " \r\n\t" };
	for (size_t m = 0; m < sizeof msgs / sizeof *msgs; m++) {
		char *c = unq(msgs[m]);
		size_t n = strlen(c);
		struct jscan js0, js;
		assert_true(jscan_message(c, n, &js0));
		assert_false(js0.lines);
		for (size_t i = 0; i <= n; i++) {
			if (!ws_place(c, n, i))
				continue;
			for (size_t b = 0; b < sizeof breaks / sizeof *breaks; b++) {
				size_t bn = strlen(breaks[b]);
				char *t = xmalloc(n + bn + 1);
				memcpy(t, c, i);
				memcpy(t + i, breaks[b], bn);
				memcpy(t + i + bn, c + i, n - i + 1);
				if (!scan_raw(t, n + bn, &js))
					fail_msg("declined with a line break at %zu: %s", i, t);
				if (!js.lines)
					fail_msg("no \"lines\" with a line break at %zu: %s", i, t);
				for (int k = 0; k < JSCAN_SPANS; k++)
					same_span(js0.span[k], js.span[k], "a span", t);
				same_span(js0.method, js.method, "method", t);
				same_span(js0.name, js.name, "name", t);
				same_span(js0.uri, js.uri, "uri", t);
				assert_int_equal(js0.id_int, js.id_int);
				assert_int_equal(js0.is_error, js.is_error);
				assert_int_equal(js0.id_is_string, js.id_is_string);
				assert_int_equal(js0.has_params, js.has_params);
				free(t);
			}
		}
		free(c);
	}
}

/* Two values, whatever is between them, are not one message. */
static void test_decline_two_values(void **state)
{
	(void)state;
	static const char *const between[] = { "", " ", "\n", "\r", "\r\n", "\t\n " };
	for (size_t i = 0; i < sizeof between / sizeof *between; i++) {
		char text[256];
		struct jscan js;
		snprintf(text, sizeof text, "{'jsonrpc':'2.0','id':1,'method':'ping'}%s"
			 "{'jsonrpc':'2.0','id':2,'method':'ping'}", between[i]);
		assert_false(scan(text, &js));
		snprintf(text, sizeof text, "{'jsonrpc':'2.0','id':1,'method':'ping'}%s1", between[i]);
		assert_false(scan(text, &js));
	}
}

/* Members in any order: params first, jsonrpc last. */
static void test_member_order(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'params':{'_meta':{'progressToken':'p'},'uri':'u:1'},"
			 "'method':'resources/read','id':'q','jsonrpc':'2.0'}", &js));
	assert_span(js.id, "'q'");
	assert_span(js.method, "resources/read");
	assert_span(js.uri, "u:1");
	assert_span(js.token, "'p'");
	assert_true(scan("{'result':{'isError':true},'id':9,'jsonrpc':'2.0'}", &js));
	assert_true(js.is_error);
	assert_span(js.id, "9");
}

/* Unknown top-level members are scanned and ignored. */
static void test_unknown_members(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','x':{'id':5,'method':'no'},'id':1,"
			 "'method':'m','y':[1,'id']}", &js));
	assert_span(js.id, "1");
	assert_span(js.method, "m");
}

/* Strings of every length around the four-bytes-at-a-time loop. */
static void test_string_lengths(void **state)
{
	(void)state;
	char msg[128], want[16];
	struct jscan js;
	for (int len = 0; len <= 13; len++) {
		memset(want, 'a' + len, (size_t)len);
		want[len] = '\0';
		snprintf(msg, sizeof msg, "{'jsonrpc':'2.0','id':1,'method':'m',"
			 "'params':{'name':'%s'}}", want);
		assert_true(scan(msg, &js));
		assert_span(js.name, want);
	}
}

/* A control character at any offset of a string is caught. */
static void test_control_char_any_offset(void **state)
{
	(void)state;
	char msg[128], name[16];
	for (int len = 1; len <= 12; len++)
		for (int at = 0; at < len; at++) {
			memset(name, 'x', (size_t)len);
			name[len] = '\0';
			name[at] = '\x01';
			snprintf(msg, sizeof msg, "{'jsonrpc':'2.0','id':1,'method':'m',"
				 "'params':{'name':'%s'}}", name);
			assert_declined(msg);
		}
}

/* ---- what it declines ---- */

/* Escaped keys at the top, in params and in _meta. */
static void test_decline_escaped_keys(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','\\u0069d':1,'method':'m'}");
	assert_declined("{'json\\u0072pc':'2.0','id':1,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','\\n':1}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'n\\u0061me':'x'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'a\\tb':'x'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m',"
			"'params':{'_meta':{'progress\\u0054oken':1}}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':{'\\/':1}}}");
}

/* A method with an escape. */
static void test_decline_escaped_method(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'tools\\/call'}");
	assert_declined("{'jsonrpc':'2.0','method':'notifications\\u002fprogress'}");
}

/* A string id with an escape. */
static void test_decline_escaped_string_id(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':'a\\u0062','method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':'a\\'','result':{}}");
}

/* Ids that are null, objects, arrays, booleans or reals. */
static void test_decline_unusual_ids(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':null,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':{},'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':[1],'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':true,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':false,'result':{}}");
	assert_declined("{'jsonrpc':'2.0','id':1.5,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':-1.0,'result':{}}");
}

/* A method that is not a string. */
static void test_decline_method_not_string(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':5}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':null}");
	assert_declined("{'jsonrpc':'2.0','method':['m']}");
}

/* Integers of 19 digits or more, wherever they are. */
static void test_decline_long_integers(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1234567890123456789,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':-1234567890123456789,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'n':1000000000000000000}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'result':[99999999999999999999999]}");
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'n':100000000000000000}}");
}

/* Exponents of three digits or more; two are fine. */
static void test_decline_long_exponents(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1e100}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1E+100}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':2.5e-100}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1e001}}");
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1e99}}");
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':-2.5E-99}}");
}

/* A real's integer part: up to 300 digits, not 301. */
static void test_long_real_integer_part(void **state)
{
	(void)state;
	char *s = xmalloc(400);
	bool accepted[3];
	for (int digits = 299; digits <= 301; digits++) {
		int n = sprintf(s, "{'jsonrpc':'2.0','id':1,'result':[1");
		memset(s + n, '0', (size_t)digits - 1);
		strcpy(s + n + digits - 1, ".5]}");
		struct jscan js;
		accepted[digits - 299] = scan(s, &js);
	}
	free(s);
	assert_true(accepted[0]);
	assert_true(accepted[1]);
	assert_false(accepted[2]);
}

/* Nesting: 64 levels in all (the message object is one) pass, 65 do not. */
static void test_depth_limit_in_params(void **state)
{
	(void)state;
	const char *head = "{'jsonrpc':'2.0','id':1,'method':'m','params':{'a':";
	assert_true(scan_nested(head, 62, false, "}}"));
	assert_false(scan_nested(head, 63, false, "}}"));
	assert_true(scan_nested(head, 62, true, "}}"));
	assert_false(scan_nested(head, 63, true, "}}"));
}

/* _meta is a level of its own. */
static void test_depth_limit_in_meta(void **state)
{
	(void)state;
	const char *head = "{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':{'a':";
	assert_true(scan_nested(head, 61, false, "}}}"));
	assert_false(scan_nested(head, 62, false, "}}}"));
	assert_true(scan_nested(head, 61, true, "}}}"));
	assert_false(scan_nested(head, 62, true, "}}}"));
}

/* The result object counts like params. */
static void test_depth_limit_in_result(void **state)
{
	(void)state;
	const char *head = "{'jsonrpc':'2.0','id':1,'result':{'a':";
	assert_true(scan_nested(head, 62, true, "}}"));
	assert_false(scan_nested(head, 63, true, "}}"));
	assert_true(scan_nested("{'jsonrpc':'2.0','id':1,'result':", 63, false, "}"));
	assert_false(scan_nested("{'jsonrpc':'2.0','id':1,'result':", 64, false, "}"));
}

/* A top-level member other than params or result. */
static void test_depth_limit_at_top(void **state)
{
	(void)state;
	const char *head = "{'jsonrpc':'2.0','id':1,'method':'m','x':";
	assert_true(scan_nested(head, 63, false, "}"));
	assert_false(scan_nested(head, 64, false, "}"));
	assert_true(scan_nested(head, 63, true, "}"));
	assert_false(scan_nested(head, 64, true, "}"));
}

/* What a scan said about the id, copied out of the scan area. */
struct id_seen {
	bool ok, is_string;
	int64_t value;
	char text[64];
};

/* Scans HEAD + ID + TAIL. */
static struct id_seen scan_id(const char *head, const char *id, const char *tail)
{
	char text[256];
	struct jscan js;
	struct id_seen r = { 0 };
	snprintf(text, sizeof text, "%s%s%s", head, id, tail);
	r.ok = scan(text, &js);
	if (r.ok) {
		assert_true(js.id.p && js.id.n < sizeof r.text);
		memcpy(r.text, js.id.p, js.id.n);
		r.is_string = js.id_is_string;
		r.value = js.id_int;
	}
	return r;
}

/*
 * {"jsonrpc":"2.0","id": is taken in one comparison and the id read on
 * the spot; the same members spelled otherwise go through top_member:
 * both ways agree on every id, accepted or not, and on what it holds.
 */
static void test_id_first_and_general_ways_agree(void **state)
{
	(void)state;
	static const char *ids[] = {
		"0", "-0", "7", "-42", "12345", "999999999999999999", "-999999999999999999",
		"1000000000000000000", "-1234567890123456789", "99999999999999999999999",
		"7.5", "7e1", "7E+1", "0.0", "-0e0", "7.", "7e", "01", "-01", "00", "-", "--1", "+1",
		"'a'", "''", "'a\\n'", "'\\u0041'", "'a", "null", "true", "false", "{}", "[1]",
		" 5 ", "\t5", "\n'x'\r", "x", "", ".5", "-.5", "1x",
	};
	static const char *heads[] = {
		"{'jsonrpc':'2.0','id':",    /* the prefix and "id": */
		"{'jsonrpc':'2.0', 'id':",   /* the prefix, then top_member */
		"{ 'jsonrpc':'2.0','id':",   /* top_member for both */
		"{'id':",                    /* top_member, "jsonrpc" after */
	};
	static const char *tails[] = { ",'method':'m'}", ",'jsonrpc':'2.0','method':'m'}" };
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
		struct id_seen want = scan_id(heads[0], ids[i], tails[0]);
		for (size_t h = 1; h < sizeof heads / sizeof *heads; h++) {
			struct id_seen got = scan_id(heads[h], ids[i], tails[h == 3]);
			if (got.ok != want.ok || got.is_string != want.is_string ||
			    got.value != want.value || strcmp(got.text, want.text) != 0)
				fail_msg("id [%s] after [%s]: %d [%s] %lld, first way %d [%s] %lld",
					 ids[i], heads[h], got.ok, got.text, (long long)got.value,
					 want.ok, want.text, (long long)want.value);
		}
	}
	struct id_seen r = scan_id(heads[0], "-999999999999999999", tails[0]);
	assert_true(r.ok && r.value == -999999999999999999LL);
	r = scan_id(heads[0], " 12345\n", tails[0]);
	assert_true(r.ok && r.value == 12345 && strcmp(r.text, "12345") == 0);
	r = scan_id(heads[0], "'a\\n'", tails[0]);
	assert_false(r.ok);
	r = scan_id(heads[0], "'a'", tails[0]);
	assert_true(r.ok && r.is_string && strcmp(r.text, "\"a\"") == 0);
	/* an id alone is a response without result: declined either way */
	assert_declined("{'jsonrpc':'2.0','id':1}");
	assert_declined("{'jsonrpc':'2.0','id':1 }");
	assert_declined("{ 'jsonrpc':'2.0','id':1}");
	/* a repeat of what the prefix took */
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','id':1}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','jsonrpc':'2.0'}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','i\\u0064':2}");
	/* cut anywhere in the prefix or in the id, nothing is read past the end */
	assert_int_equal(bad_prefixes("{'jsonrpc':'2.0','id':123456789012345678,'result':{}}"), 0);
	assert_int_equal(bad_prefixes("{'jsonrpc':'2.0','id':-7,'method':'m'}"), 0);
	assert_int_equal(bad_prefixes("{'jsonrpc':'2.0','id':'abc','method':'m'}"), 0);
}

/* Two of the same routing member. */
static void test_decline_duplicates(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'id':2,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','method':'m'}");
	assert_declined("{'jsonrpc':'2.0','jsonrpc':'2.0','id':1,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':1,'result':{},'result':{}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m',"
			"'params':{'_meta':{'progressToken':1,'progressToken':2}}}");
	assert_declined("{'jsonrpc':'2.0','method':'notifications/progress',"
			"'params':{'progressToken':1,'progressToken':1}}");
	assert_declined("{'jsonrpc':'2.0','method':'notifications/cancelled',"
			"'params':{'requestId':1,'requestId':2}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'name':'a','name':'b'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'uri':'a','uri':'a'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':{},'_meta':{}}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m',"
			"'params':{'name':'a'},'params':{'name':'b'}}");
}

/* A request's params.progressToken is an ordinary parameter beside _meta's token. */
static void test_request_params_token_is_not_the_token(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m',"
			 "'params':{'progressToken':1,'_meta':{'progressToken':2}}}", &js));
	assert_span(js.token, "2");
}

/* Overlong, surrogate, too large, stray and truncated UTF-8. */
static void test_decline_invalid_utf8(void **state)
{
	(void)state;
	static const char *bad[] = {
		"\xC0\x80", "\xC1\xBF",                 /* overlong 2-byte */
		"\xE0\x80\x80", "\xE0\x9F\xBF",         /* overlong 3-byte */
		"\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF", /* overlong 4-byte */
		"\xED\xA0\x80", "\xED\xBF\xBF",         /* UTF-16 surrogates */
		"\xF4\x90\x80\x80", "\xF5\x80\x80\x80", /* above U+10FFFF */
		"\xF8\x88\x80\x80\x80", "\xFF", "\xFE",
		"\x80", "\xBF", "a\x80" "b",            /* stray continuation */
		"\xC3", "\xE2\x82", "\xF0\x9F\x98",     /* cut short by the quote */
		"\xC3" "a", "\xE2\x82" "a", "\xE2" "a\x82",
	};
	char msg[128];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(msg, sizeof msg, "{'jsonrpc':'2.0','id':1,'method':'m',"
			 "'params':{'name':'%s'}}", bad[i]);
		assert_declined(msg);
		snprintf(msg, sizeof msg, "{'jsonrpc':'2.0','id':1,'method':'m%s'}", bad[i]);
		assert_declined(msg);
		snprintf(msg, sizeof msg, "{'jsonrpc':'2.0','id':1,'method':'m','k%s':1}", bad[i]);
		assert_declined(msg);
	}
}

/* A multi-byte sequence cut by the end of the input: declined, read in bounds. */
static void test_decline_utf8_cut_by_end(void **state)
{
	(void)state;
	static const char msg[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\xF0\x9F\x98\x80";
	struct jscan js;
	for (size_t cut = 1; cut <= 4; cut++)
		assert_false(scan_raw(msg, sizeof msg - 1 - cut, &js));
}

/* \u escapes of surrogates, paired or not. */
static void test_decline_surrogate_escapes(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\\uD800'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\\udbff'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\\uDC00'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\\uDFFF'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\\ud83d\\ude00'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'result':{'\\ud83d\\ude00':1}}");
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\\uD7FF\\uE000'}}");
}

/* Escapes JSON does not have, and short or non-hex \u escapes. */
static void test_decline_bad_escapes(void **state)
{
	(void)state;
	static const char *bad[] = {
		"\\x41", "\\a", "\\0", "\\U0041", "\\u12", "\\u", "\\u12G4", "\\u 123", "\\",
	};
	char msg[128];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(msg, sizeof msg, "{'jsonrpc':'2.0','id':1,'method':'m',"
			 "'params':{'s':'%s'}}", bad[i]);
		assert_declined(msg);
	}
	static const char sq[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\","
		"\"params\":{\"s\":\"\\'\"}}";
	struct jscan js;
	assert_false(scan_raw(sq, sizeof sq - 1, &js));
}

/* Raw control characters inside strings, NUL included. */
static void test_decline_control_chars(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'a\nb'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'a\tb'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\r'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'\x1f'}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m\x01'}");
	static const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\0b\"}";
	struct jscan js;
	assert_false(scan_raw(nul, sizeof nul - 1, &js));
}

/* A request or notification that also carries result or error. */
static void test_decline_request_with_result(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','result':{}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','result':null}");
	assert_declined("{'jsonrpc':'2.0','method':'m','result':{}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','error':{'code':1,'message':'x'}}");
	assert_declined("{'jsonrpc':'2.0','method':'m','error':{'code':1,'message':'x'}}");
}

/* A response with both result and error, or neither. */
static void test_decline_response_shape(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1}");
	assert_declined("{'jsonrpc':'2.0','id':1,'params':{}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'result':{},'error':{'code':1,'message':'x'}}");
	assert_declined("{'jsonrpc':'2.0','result':{}}");
	assert_declined("{'jsonrpc':'2.0'}");
}

/* Error responses, however well formed: the full path checks them. */
static void test_decline_error_response(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'error':{'code':-32601,'message':'no'}}");
	assert_declined("{'jsonrpc':'2.0','id':'a','error':{'code':-32000,'message':'x',"
			"'data':null}}");
}

/* Anything after the object but white space. */
static void test_decline_trailing_garbage(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m'}x");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m'}{}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m'},");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m'} }");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m'}\n{'jsonrpc':'2.0','id':2,"
			"'method':'m'}");
	static const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\0";
	struct jscan js;
	assert_false(scan_raw(nul, sizeof nul - 1, &js));
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m'} \r\n\t");
}

/* No jsonrpc member, or one that is not exactly "2.0". */
static void test_decline_jsonrpc(void **state)
{
	(void)state;
	assert_declined("{'id':1,'method':'m'}");
	assert_declined("{'id':1,'result':{}}");
	assert_declined("{'jsonrpc':'1.0','id':1,'method':'m'}");
	assert_declined("{'jsonrpc':'2.1','id':1,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0 ','id':1,'method':'m'}");
	assert_declined("{'jsonrpc':'2','id':1,'method':'m'}");
	assert_declined("{'jsonrpc':2.0,'id':1,'method':'m'}");
	assert_declined("{'jsonrpc':'2\\u002e0','id':1,'method':'m'}");
	assert_declined("{'jsonrpc':null,'id':1,'method':'m'}");
	assert_declined("{'jsonrpc':'','id':1,'method':'m'}");
}

/* Input that is not a JSON object. */
static void test_decline_not_object(void **state)
{
	(void)state;
	struct jscan js;
	assert_false(jscan_message(NULL, 0, &js));
	assert_false(scan_raw("", 0, &js));
	assert_declined(" \t\r\n");
	assert_declined("[{'jsonrpc':'2.0','id':1,'method':'m'}]");
	assert_declined("'jsonrpc'");
	assert_declined("1");
	assert_declined("null");
	assert_declined("\xEF\xBB\xBF{'jsonrpc':'2.0','id':1,'method':'m'}");
}

/* Malformed JSON of every kind. */
static void test_decline_malformed(void **state)
{
	(void)state;
	static const char *bad[] = {
		"{'jsonrpc':'2.0' 'id':1,'method':'m'}",      /* missing comma */
		"{'jsonrpc':'2.0','id':1,'method':'m',}",     /* trailing comma */
		"{,'jsonrpc':'2.0','id':1,'method':'m'}",     /* leading comma */
		"{'jsonrpc':'2.0',,'id':1,'method':'m'}",     /* double comma */
		"{'jsonrpc':'2.0','id' 1,'method':'m'}",      /* missing colon */
		"{'jsonrpc':'2.0','id'::1,'method':'m'}",     /* double colon */
		"{'jsonrpc':'2.0',id:1,'method':'m'}",        /* bare key */
		"{'jsonrpc':'2.0',1:1,'method':'m'}",         /* number key */
		"{'jsonrpc':'2.0','id':1,'method':'m'",       /* unclosed object */
		"{'jsonrpc':'2.0','id':1,'method':'m]",       /* unclosed string */
		"{'jsonrpc':'2.0','id':1,'method':'m','params':[1,2}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':[1,]}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':[,1]}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'a':}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'a'}}",
		"{'jsonrpc':'2.0','id':01,'method':'m'}",     /* leading zero */
		"{'jsonrpc':'2.0','id':-01,'method':'m'}",
		"{'jsonrpc':'2.0','id':+1,'method':'m'}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':.5}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1.}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1.e5}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1e}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1e+}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':-}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':- 1}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':0x10}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':NaN}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':Infinity}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':tru}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':True}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':nul}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':truex}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':nullnull}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':1 2}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':'a' 'b'}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':\f1}}",  /* form feed */
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':\v1}}",  /* vertical tab */
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_declined(bad[i]);
}

/* ---- unusual but accepted ---- */

/* \u escapes that are not surrogates, and the short escapes. */
static void test_accept_unicode_escapes(void **state)
{
	(void)state;
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':"
			"'\\u0041\\u00e9\\u20AC\\uFFFF\\uffFe\\u0001\\u007f'}}");
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':"
			"'\\'\\\\\\/\\b\\f\\n\\r\\t'}}");
}

/* Two-, three- and four-byte UTF-8 at the edges of each range. */
static void test_accept_utf8(void **state)
{
	(void)state;
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','id':1,'method':'m\xC3\xA9','params':{'name':"
			 "'\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF"
			 "\xF0\x90\x80\x80\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\x7F'}}", &js));
	assert_span(js.method, "m\xC3\xA9");
	assert_span(js.name, "\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF"
		    "\xF0\x90\x80\x80\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\x7F");
	assert_false(js.subject_escaped);
	assert_true(scan("{'jsonrpc':'2.0','id':'\xE2\x82\xAC','result':{'\xF0\x9F\x98\x80':1}}",
			 &js));
	assert_span(js.id, "'\xE2\x82\xAC'");
}

/* Reals, exponents of up to two digits, minus zero. */
static void test_accept_numbers(void **state)
{
	(void)state;
	assert_accepted("{'jsonrpc':'2.0','id':-0,'method':'m','params':{'a':[0,-0,0.0,-0.0,"
			"1e5,1E5,1e+5,1e-5,1.5e99,-1.5E-99,3.14159265358979323846264338,"
			"12345678901234567890.5,1e0,0e0]}}");
}

/* Arrays nested 60 deep inside params. */
static void test_accept_nested_arrays(void **state)
{
	(void)state;
	assert_true(scan_nested("{'jsonrpc':'2.0','id':1,'method':'m','params':{'a':",
				60, false, "}}"));
}

/* Literals, empty containers and empty strings in every position. */
static void test_accept_literals_and_empties(void **state)
{
	(void)state;
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'':'','t':true,"
			"'f':false,'n':null,'o':{},'a':[],'aa':[[],{},'',0]},'':[]}");
}

/* ---- jspan_eq ---- */

/* Equal only for the same bytes; an absent span equals nothing. */
static void test_jspan_eq(void **state)
{
	(void)state;
	const char *text = "tools/call";
	struct jspan s = { text, 10 };
	assert_true(jspan_eq(s, "tools/call"));
	assert_false(jspan_eq(s, "tools/cal"));
	assert_false(jspan_eq(s, "tools/calls"));
	assert_false(jspan_eq(s, "tools/CALL"));
	assert_false(jspan_eq(s, ""));
	struct jspan pre = { text, 5 };
	assert_true(jspan_eq(pre, "tools"));
	assert_false(jspan_eq(pre, "tools/call"));
	struct jspan empty = { text, 0 };
	assert_true(jspan_eq(empty, ""));
	assert_false(jspan_eq(empty, "t"));
	struct jspan none = { NULL, 0 };
	assert_false(jspan_eq(none, ""));
	assert_false(jspan_eq(none, "x"));
	struct jscan js;
	assert_true(scan("{'jsonrpc':'2.0','method':'notifications/progress',"
			 "'params':{'progressToken':1}}", &js));
	assert_true(jspan_eq(js.method, "notifications/progress"));
	assert_false(jspan_eq(js.method, "notifications/cancelled"));
	assert_false(jspan_eq(js.id, ""));
}

/* ---- bounds ---- */

/* Every proper prefix of valid messages is declined, and read only within itself. */
static void test_truncated_prefixes(void **state)
{
	(void)state;
	static const char *msgs[] = {
		"{'jsonrpc':'2.0','id':12,'method':'tools/call','params':{'name':'echo',"
		"'arguments':{'t':'caf\\u00e9 \xF0\x9F\x98\x80 \xC3\xA9','n':[1,-2.5e3,true,false,"
		"null]},'_meta':{'progressToken':'t'}}}",
		"{'jsonrpc':'2.0','id':'r','method':'resources/read','params':{'uri':'a\\/b'}}",
		"{'jsonrpc':'2.0','method':'notifications/progress','params':{'progressToken':7,"
		"'progress':1}}",
		"{'jsonrpc':'2.0','method':'notifications/cancelled','params':{'requestId':7}}",
		"{'jsonrpc':'2.0','id':-3,'result':{'content':[],'isError':true}}",
		"{ 'jsonrpc' : '2.0' , 'id' : 1 , 'method' : 'm' , 'params' : { 'name' : 'x' ,"
		" 'uri' : 'y' , '_meta' : { 'progressToken' : 1 } } , 'z' : [ { } ] }",
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof msgs / sizeof *msgs; i++) {
		assert_accepted(msgs[i]);
		bad += bad_prefixes(msgs[i]);
	}
	assert_int_equal(bad, 0);
}

/* The decoded values agree with jansson's reading of the same bytes. */
static void test_agrees_with_jansson(void **state)
{
	(void)state;
	static const char *msgs[] = {
		"{'jsonrpc':'2.0','id':7,'method':'tools/call','params':{'name':'echo',"
		"'arguments':{'a':[1,{'b':null}]},'_meta':{'progressToken':'tok','x':[1.5e3]}}}",
		"{'jsonrpc':'2.0','id':'s-\xC3\xA9','method':'resources/read','params':"
		"{'uri':'file:///x','_meta':{'progressToken':-9}}}",
		"{'jsonrpc':'2.0','method':'notifications/progress','params':{'progressToken':"
		"'p\\u00e9','progress':3}}",
		"{'jsonrpc':'2.0','method':'notifications/cancelled','params':{'requestId':'r'}}",
		"{'jsonrpc':'2.0','id':-42,'result':{'isError':true,'content':[]}}",
		"{'jsonrpc':'2.0','id':0,'result':{'isError':false}}",
		"{ 'params' : { '_meta' : { } , 'name' : 'n' } , 'jsonrpc' : '2.0' , 'id' : "
		"999999999999999999 , 'method' : 'prompts/get' }",
	};
	for (size_t i = 0; i < sizeof msgs / sizeof *msgs; i++) {
		struct jscan js;
		char *text = unq(msgs[i]);
		assert_true(scan(msgs[i], &js));
		json_t *m = json_loads(text, 0, NULL);
		assert_non_null(m);
		json_t *params = json_object_get(m, "params");
		json_t *meta = json_object_get(params, "_meta");
		json_t *id = json_object_get(m, "id");
		assert_int_equal(js.id.p != NULL, id != NULL);
		if (id && js.id_is_string)
			assert_true(jspan_eq((struct jspan){ js.id.p + 1, js.id.n - 2 },
					     json_string_value(id)));
		else if (id)
			assert_int_equal(strtoll(js.id.p, NULL, 10), json_integer_value(id));
		assert_int_equal(js.method.p != NULL, json_object_get(m, "method") != NULL);
		if (js.method.p)
			assert_true(jspan_eq(js.method,
					     json_string_value(json_object_get(m, "method"))));
		if (js.name.p)
			assert_true(jspan_eq(js.name,
					     json_string_value(json_object_get(params, "name"))));
		if (js.uri.p)
			assert_true(jspan_eq(js.uri,
					     json_string_value(json_object_get(params, "uri"))));
		json_t *tok = js.token.p ?
			json_loadb(js.token.p, js.token.n, JSON_DECODE_ANY, NULL) : NULL;
		json_t *want = js.method.p && jspan_eq(js.method, "notifications/progress") ?
			json_object_get(params, "progressToken") :
			json_object_get(meta, "progressToken");
		assert_true(tok ? json_equal(tok, want) : want == NULL);
		json_decref(tok);
		json_t *mt = js.meta.p ? json_loadb(js.meta.p, js.meta.n, 0, NULL) : NULL;
		assert_true(mt ? json_equal(mt, meta) : meta == NULL);
		json_decref(mt);
		json_t *rid = js.request_id.p ?
			json_loadb(js.request_id.p, js.request_id.n, JSON_DECODE_ANY, NULL) : NULL;
		assert_true(rid ? json_equal(rid, json_object_get(params, "requestId")) :
			    json_object_get(params, "requestId") == NULL);
		json_decref(rid);
		assert_int_equal(js.is_error,
				 json_is_true(json_object_get(json_object_get(m, "result"),
							      "isError")));
		json_decref(m);
		free(text);
	}
}

/* A NUL escape passes: the full path parses with JSON_ALLOW_NUL (rpc.c). */
static void test_accept_nul_escape(void **state)
{
	(void)state;
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'s':'a\\u0000b'}}");
}

/* ---- regressions: defects this suite found in jscan.c, fixed ---- */

/*
 * Regression (found by this suite, fixed): a value that starts exactly at the end of the input is read
 * (top_member for "params"/"result", params_member for "_meta",
 * string_member for "name"/"uri" test *v before value() checks v < e):
 * one byte past the given length.
 */
static void test_regression_reads_past_end_after_colon(void **state)
{
	(void)state;
	static const char *cut[] = {
		"{'jsonrpc':'2.0','id':1,'method':'m','params':",
		"{'jsonrpc':'2.0','id':1,'method':'m','params': \n",
		"{'jsonrpc':'2.0','id':1,'result':",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'name':",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'uri':",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':",
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
		char *s = unq(cut[i]);
		if (scan_in_child(s, strlen(s)) != 0) {
			print_message("reads past the end of: %s\n", s);
			bad++;
		}
		free(s);
	}
	assert_int_equal(bad, 0);
}

/*
 * Regression (found by this suite, fixed): an id written with an exponent but no '.' (1e2) is a real for
 * jansson, yet accepted as an integer id; the fast path then reads it
 * with strtoll as 1 and answers with id 1.
 */
static void test_regression_exponent_id_accepted(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1e2,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':1E0,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':-5e+1,'result':{}}");
}

/*
 * Regression (found by this suite, fixed): a real whose integer part is long enough (up to 300 digits) and
 * whose two-digit exponent pushes it past DBL_MAX is accepted; jansson
 * rejects it ("real number overflow"), so the scanner is not a subset.
 */
static void test_regression_real_overflow_accepted(void **state)
{
	(void)state;
	char *s = xmalloc(400);
	int n = sprintf(s, "{'jsonrpc':'2.0','id':1,'result':{'x':1");
	memset(s + n, '0', 210);
	strcpy(s + n + 210, "e99}}");
	char *text = unq(s);
	json_t *j = json_loads(text, 0, NULL);   /* NULL: "real number overflow" */
	struct jscan js;
	bool ok = scan(s, &js);
	json_decref(j);
	free(text);
	free(s);
	assert_null(j);
	assert_false(ok);
}

/*
 * Regression (found by this suite, fixed): an escaped key among result's members is neither declined (as at
 * the top, in params and in _meta) nor decoded, so "is\u0045rror":true,
 * which jansson reads as isError true, leaves is_error false.
 */
static void test_regression_escaped_is_error_key(void **state)
{
	(void)state;
	struct jscan js;
	bool ok = scan("{'jsonrpc':'2.0','id':1,'result':{'is\\u0045rror':true}}", &js);
	assert_true(!ok || js.is_error);
}

/*
 * Regression (found by this suite, fixed): params.progressToken is recorded as the token of any message, not
 * only of notifications/progress, and params._meta.progressToken of a
 * progress notification too. The full path takes a request's token only
 * from _meta (rpc_progress_token) and a progress token only from params
 * (on_progress), so the fast path rewrites a request's
 * params.progressToken that the full path leaves alone.
 */
static void test_regression_token_taken_from_wrong_place(void **state)
{
	(void)state;
	struct jscan js;
	bool ok = scan("{'jsonrpc':'2.0','id':1,'method':'tools/call',"
		       "'params':{'name':'t','progressToken':'arg'}}", &js);
	assert_true(!ok || js.token.p == NULL);
	ok = scan("{'jsonrpc':'2.0','method':'notifications/progress',"
		  "'params':{'_meta':{'progressToken':1},'progress':1}}", &js);
	assert_true(!ok || js.token.p == NULL);
}

/*
 * Regression (found by this suite, fixed): a routing member repeated with a value of another type is not
 * declined: the span keeps the first value, while jansson (last wins)
 * sees the second.
 */
static void test_regression_duplicate_of_other_type(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':'safe',"
			"'name':5}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'resources/read','params':"
			"{'uri':'a','uri':null}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':"
			"{'progressToken':1},'_meta':null}}");
}

/*
 * Regression (found by this suite, fixed): a second "params" object is not declined, so name, uri, token and
 * meta can come from a params object that jansson (last wins) discards.
 */
static void test_regression_duplicate_params(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'tools/call',"
			"'params':{'name':'a','_meta':{'progressToken':1}},'params':{}}");
	assert_declined("{'jsonrpc':'2.0','id':1,'method':'tools/call',"
			"'params':{'name':'a'},'params':[]}");
}

/*
 * Regression (found by this suite, fixed): result.isError true then false sets is_error, while jansson reads
 * false (last wins).
 */
static void test_regression_duplicate_is_error(void **state)
{
	(void)state;
	struct jscan js;
	bool ok = scan("{'jsonrpc':'2.0','id':1,'result':{'isError':true,'isError':false}}",
		       &js);
	assert_true(!ok || !js.is_error);
}

/* ---- walking into an accepted message: jscan_member, jscan_items ---- */

/* Member KEY of the object TEXT (' for ", copied to end at the guard page). */
static int member(const char *text, const char *key, struct jspan *val)
{
	char *u = unq(text);
	size_t n = strlen(u);
	char *at = guard_end - n;
	memmove(at, u, n);
	free(u);
	return jscan_member((struct jspan){ at, n }, key, val);
}

/* Members: found (the last of repeats), absent, white space, not an object, escaped keys. */
static void test_member(void **state)
{
	(void)state;
	struct jspan v;
	assert_int_equal(member("{'a':1,'b':[1,{'a':2}],'c':'x'}", "b", &v), 1);
	assert_span(v, "[1,{'a':2}]");
	assert_int_equal(member("{'a':1,'b':[1,{'a':2}],'c':'x'}", "a", &v), 1);
	assert_span(v, "1");
	assert_int_equal(member(" { 'a' : { } , 'a' : 'last' } ", "a", &v), 1);
	assert_span(v, "'last'");
	assert_int_equal(member("{'a':1}", "b", &v), 0);
	assert_int_equal(member("{'ab':1}", "a", &v), 0);
	assert_int_equal(member("{}", "a", &v), 0);
	assert_int_equal(member("[1]", "a", &v), -1);
	assert_int_equal(member("'a'", "a", &v), -1);
	assert_int_equal(member("{'\\u0061':1}", "a", &v), -1);
	assert_int_equal(member("{'a':1,}", "a", &v), -1);
	assert_int_equal(member("{'a':1", "a", &v), -1);   /* ends at the guard page */
	assert_int_equal(member("{'a'", "a", &v), -1);
	assert_int_equal(member("{'a':'x\\\\'}", "a", &v), 1);   /* an escaped backslash ends nothing */
	assert_span(v, "'x\\\\'");
	assert_int_equal(member("{'a':'x\\'', 'b':2}", "b", &v), 1);  /* an escaped quote neither */
	assert_span(v, "2");
	assert_int_equal(member("{'a':'{[', 'b':{'c':'}]'}}", "b", &v), 1);  /* brackets in strings */
	assert_span(v, "{'c':'}]'}");
}

/* Elements with their member FIELD found in the same pass. */
static void test_items_field(void **state)
{
	(void)state;
	char *u = unq("[{'name':'a','x':{'name':'inner'}},7,{'x':1},{'name':'b','name':'c'},"
		      "{'name':3},['name']]");
	size_t len = strlen(u);
	char *at = guard_end - len;
	memmove(at, u, len);
	free(u);
	struct jscan_items it;
	struct jspan item, fv;
	const char *want[] = { "'a'", NULL, NULL, "'c'", "3", NULL };
	assert_true(jscan_items_begin(&it, (struct jspan){ at, len }));
	for (int i = 0; i < 6; i++) {
		assert_int_equal(jscan_items_next(&it, &item, "name", &fv), 1);
		if (want[i])
			assert_span(fv, want[i]);
		else
			assert_absent(fv);
	}
	assert_int_equal(jscan_items_next(&it, &item, "name", &fv), 0);
	assert_false(it.escaped);
	/* an escaped key in an element: the walk stops and says why */
	u = unq("[{'name':'a'},{'n\\u0061me':'b'}]");
	len = strlen(u);
	at = guard_end - len;
	memmove(at, u, len);
	free(u);
	assert_true(jscan_items_begin(&it, (struct jspan){ at, len }));
	assert_int_equal(jscan_items_next(&it, &item, "name", &fv), 1);
	assert_int_equal(jscan_items_next(&it, &item, "name", &fv), -1);
	assert_true(it.escaped);
}

/* The elements of ARR (' for "), joined with | into OUT; returns the last next() result. */
static int items(const char *arr, char *out, size_t n)
{
	char *u = unq(arr);
	size_t len = strlen(u), l = 0;
	char *at = guard_end - len;
	memmove(at, u, len);
	free(u);
	struct jscan_items it;
	struct jspan item;
	int r;
	out[0] = '\0';
	if (!jscan_items_begin(&it, (struct jspan){ at, len }))
		return -2;
	while ((r = jscan_items_next(&it, &item, NULL, NULL)) == 1)
		l += (size_t)snprintf(out + l, n - l, "%s%.*s", l ? "|" : "", (int)item.n, item.p);
	return r;
}

/* Array elements: nested values, white space, empty, and malformed arrays. */
static void test_items(void **state)
{
	(void)state;
	char out[256];
	assert_int_equal(items("[1,'a,b',{'x':[1,2]},[],null]", out, sizeof out), 0);
	assert_string_equal(out, "1|\"a,b\"|{\"x\":[1,2]}|[]|null");
	assert_int_equal(items(" [ 1 ,\n 2 ] ", out, sizeof out), 0);
	assert_string_equal(out, "1|2");
	assert_int_equal(items("[]", out, sizeof out), 0);
	assert_string_equal(out, "");
	assert_int_equal(items("[ ]", out, sizeof out), 0);
	assert_int_equal(items("{}", out, sizeof out), -2);
	assert_int_equal(items("[1,]", out, sizeof out), -1);
	assert_int_equal(items("[,1]", out, sizeof out), -1);
	assert_int_equal(items("[1 2]", out, sizeof out), -1);
	assert_int_equal(items("[1", out, sizeof out), -1);
	assert_int_equal(items("[1,", out, sizeof out), -1);
	assert_int_equal(items("[", out, sizeof out), -1);
}

/*
 * Regression (fuzzing, issue "hardening" (a)): a \\u0000 in a key below
 * the members the scanner records (here in params.arguments) was
 * accepted, and the line forwarded as it came; jansson refuses such a key
 * even with JSON_ALLOW_NUL, so the backend could not parse it and the
 * request was never answered. Now the scan declines, and the full path
 * answers -32700 (a NUL in a string value stays accepted, as by rpc.c).
 */
static void test_regression_nul_in_nested_key(void **state)
{
	(void)state;
	static const char *msgs[] = {
		"{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':'x',"
		"'arguments':{'a\\u0000b':1}}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'x':[{'\\u0000':1}]}}",
		"{'jsonrpc':'2.0','id':1,'result':{'content':{'k\\u0000':null}}}",
		"{'jsonrpc':'2.0','id':1,'method':'m','params':{'_meta':{'o':{'\\u0000':1}}}}",
	};
	for (size_t i = 0; i < sizeof msgs / sizeof *msgs; i++) {
		char *t = unq(msgs[i]);
		json_error_t e;
		assert_null(json_loadb(t, strlen(t), JSON_ALLOW_NUL | JSON_DECODE_ANY, &e));
		assert_declined(msgs[i]);
		free(t);
	}
	/* an escaped backslash before u0000 is no NUL; other escapes pass */
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'o':{'a\\\\u0000':1}}}");
	assert_accepted("{'jsonrpc':'2.0','id':1,'method':'m','params':{'o':{'\\u0001':1}}}");
}

/*
 * The scanner's integer id keys as rpc_id_key keys the same id parsed
 * by jansson (the rule in rpc.h); a real id declines.
 */
static void test_id_int_key_matches_rpc(void **state)
{
	(void)state;
	static const char *ids[] = { "0", "-0", "7", "-42", "999999999999999999",
				     "-999999999999999999", "100000000000000000" };
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
		char text[128];
		struct jscan js;
		unsigned char a[RPC_KEY_MAX], b[RPC_KEY_MAX];
		snprintf(text, sizeof text, "{'jsonrpc':'2.0','id':%s,'method':'m'}", ids[i]);
		assert_true(scan(text, &js));
		json_t *id = json_loads(ids[i], JSON_DECODE_ANY, NULL);
		assert_non_null(id);
		size_t na = rpc_id_key(id, a), nb = rpc_id_key_int(js.id_int, b);
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na);
		json_decref(id);
	}
	assert_declined("{'jsonrpc':'2.0','id':1.0,'method':'m'}");
	assert_declined("{'jsonrpc':'2.0','id':10000000000000000000.5,'method':'m'}");
}

/*
 * Regression (fuzzing, fuzz_jscan under clang's UBSan): a real id with
 * more than 18 digits before its point had its digits added up into an
 * int64_t before the point was seen: signed overflow. Such ids decline.
 */
static void test_regression_long_real_id_overflow(void **state)
{
	(void)state;
	assert_declined("{'jsonrpc':'2.0','id':10000000000000000000.5,'method':'ping'}");
	assert_declined("{'jsonrpc':'2.0','id':-9111111111111111111111.1,'method':'ping'}");
	assert_declined("{'jsonrpc':'2.0','id':99999999999999999999999999e5,'method':'ping'}");
	assert_declined("{'jsonrpc':'2.0','id':1.0,'result':{}}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regression_long_real_id_overflow),
		cmocka_unit_test(test_regression_nul_in_nested_key),
		cmocka_unit_test(test_id_int_key_matches_rpc),
		cmocka_unit_test(test_request_all_spans),
		cmocka_unit_test(test_request_string_id),
		cmocka_unit_test(test_request_negative_id),
		cmocka_unit_test(test_request_id_value),
		cmocka_unit_test(test_member),
		cmocka_unit_test(test_items),
		cmocka_unit_test(test_items_field),
		cmocka_unit_test(test_id_every_length),
		cmocka_unit_test(test_request_zero_id),
		cmocka_unit_test(test_request_empty_string_id),
		cmocka_unit_test(test_request_18_digit_id),
		cmocka_unit_test(test_request_integer_token),
		cmocka_unit_test(test_request_meta_without_token),
		cmocka_unit_test(test_request_empty_meta),
		cmocka_unit_test(test_request_meta_not_object),
		cmocka_unit_test(test_request_without_params),
		cmocka_unit_test(test_request_empty_params),
		cmocka_unit_test(test_request_params_array),
		cmocka_unit_test(test_decline_params_scalar),
		cmocka_unit_test(test_resources_read_uri),
		cmocka_unit_test(test_name_escaped),
		cmocka_unit_test(test_uri_escaped),
		cmocka_unit_test(test_escape_elsewhere_not_subject),
		cmocka_unit_test(test_name_empty),
		cmocka_unit_test(test_name_not_string),
		cmocka_unit_test(test_deeper_members_ignored),
		cmocka_unit_test(test_escaped_key_in_arguments),
		cmocka_unit_test(test_progress_string_token),
		cmocka_unit_test(test_progress_integer_token),
		cmocka_unit_test(test_cancelled_request_id),
		cmocka_unit_test(test_notification_without_params),
		cmocka_unit_test(test_response_result_object),
		cmocka_unit_test(test_response_string_id),
		cmocka_unit_test(test_response_is_error_true),
		cmocka_unit_test(test_response_is_error_not_true),
		cmocka_unit_test(test_response_result_not_object),
		cmocka_unit_test(test_response_nested_is_error_ignored),
		cmocka_unit_test(test_response_with_params),
		cmocka_unit_test(test_whitespace_everywhere),
		cmocka_unit_test(test_lines_only_for_raw_breaks),
		cmocka_unit_test(test_lines_every_position),
		cmocka_unit_test(test_decline_two_values),
		cmocka_unit_test(test_member_order),
		cmocka_unit_test(test_unknown_members),
		cmocka_unit_test(test_string_lengths),
		cmocka_unit_test(test_control_char_any_offset),
		cmocka_unit_test(test_decline_escaped_keys),
		cmocka_unit_test(test_decline_escaped_method),
		cmocka_unit_test(test_decline_escaped_string_id),
		cmocka_unit_test(test_decline_unusual_ids),
		cmocka_unit_test(test_decline_method_not_string),
		cmocka_unit_test(test_decline_long_integers),
		cmocka_unit_test(test_decline_long_exponents),
		cmocka_unit_test(test_long_real_integer_part),
		cmocka_unit_test(test_depth_limit_in_params),
		cmocka_unit_test(test_depth_limit_in_meta),
		cmocka_unit_test(test_depth_limit_in_result),
		cmocka_unit_test(test_depth_limit_at_top),
		cmocka_unit_test(test_decline_duplicates),
		cmocka_unit_test(test_request_params_token_is_not_the_token),
		cmocka_unit_test(test_decline_invalid_utf8),
		cmocka_unit_test(test_decline_utf8_cut_by_end),
		cmocka_unit_test(test_decline_surrogate_escapes),
		cmocka_unit_test(test_decline_bad_escapes),
		cmocka_unit_test(test_decline_control_chars),
		cmocka_unit_test(test_decline_request_with_result),
		cmocka_unit_test(test_decline_response_shape),
		cmocka_unit_test(test_decline_error_response),
		cmocka_unit_test(test_decline_trailing_garbage),
		cmocka_unit_test(test_decline_jsonrpc),
		cmocka_unit_test(test_decline_not_object),
		cmocka_unit_test(test_decline_malformed),
		cmocka_unit_test(test_accept_unicode_escapes),
		cmocka_unit_test(test_accept_utf8),
		cmocka_unit_test(test_accept_numbers),
		cmocka_unit_test(test_accept_nested_arrays),
		cmocka_unit_test(test_accept_literals_and_empties),
		cmocka_unit_test(test_accept_nul_escape),
		cmocka_unit_test(test_jspan_eq),
		cmocka_unit_test(test_truncated_prefixes),
		cmocka_unit_test(test_agrees_with_jansson),
		cmocka_unit_test(test_regression_reads_past_end_after_colon),
		cmocka_unit_test(test_regression_exponent_id_accepted),
		cmocka_unit_test(test_regression_real_overflow_accepted),
		cmocka_unit_test(test_regression_escaped_is_error_key),
		cmocka_unit_test(test_regression_token_taken_from_wrong_place),
		cmocka_unit_test(test_regression_duplicate_of_other_type),
		cmocka_unit_test(test_regression_duplicate_params),
		cmocka_unit_test(test_regression_duplicate_is_error),
		cmocka_unit_test(test_id_first_and_general_ways_agree),
	};
	return cmocka_run_group_tests(tests, guard_setup, NULL);
}
