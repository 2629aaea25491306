/* test_srv_client_secrets.c: the server client's error messages never carry the credentials of
 * its URL (http://ergon:TOKEN@host, the documented form): a connect failure, a retried one, a
 * URL with the wrong scheme. The messages reach Python's ServerError and Zeus's tracebacks. */
#include "ergon/server_client.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* A TCP port on 127.0.0.1 that refuses connections: bound, never listening (no race with
 * another process taking it while the socket lives). The socket in *fd. */
static int closed_port(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(*fd, (struct sockaddr *)&a, &len))
        return -1;
    return ntohs(a.sin_port);
}

static void assert_no_secret(const char *msg)
{
    ASSERT_MSG(!strstr(msg, "SECRET"), "the token leaks into the message: %s", msg);
    ASSERT_MSG(!strstr(msg, "ergon:"), "the user:password part leaks into the message: %s", msg);
}

TEST(connect_failure_message_has_no_token)
{
    int fd, port = closed_port(&fd);
    ASSERT(port > 0);
    char url[200];
    snprintf(url, sizeof url, "http://ergon:SECRET@127.0.0.1:%d", port);
    erg_srv_client_opts o;
    erg_srv_client_opts_init(&o);
    o.max_retries = 0;
    erg_error err;
    erg_srv_client *c = NULL;
    erg_status st = erg_srv_client_new(url, &o, &c, &err);
    if (st == ERG_ENOTSUP)
        SKIP("libcurl cannot be loaded: %s", err.msg);
    ASSERT_OK(st);
    int http = 0;
    char *resp = NULL;
    ASSERT_EQ_INT(erg_srv_client_request(c, "GET", "/v1/jobs", NULL, &http, &resp, &err), ERG_ENET);
    printf("# %s\n", err.msg);
    assert_no_secret(err.msg);
    /* still says where it went, with the credentials replaced */
    char where[100];
    snprintf(where, sizeof where, "http://***@127.0.0.1:%d/v1/jobs", port);
    ASSERT_CONTAINS(err.msg, where);
    /* a heartbeat gives up after retries: the longer message, the same rule */
    ASSERT(erg_srv_client_heartbeat(c, "job-1", 0, &err) != ERG_OK);
    assert_no_secret(err.msg);
    erg_srv_client_free(c);
    o.max_retries = 1;
    o.backoff_initial_s = 0;
    o.backoff_max_s = 0;
    /* a password with characters URL-encoded, and a token that is all userinfo */
    const char *forms[] = {"http://ergon:SECRET%%40x@127.0.0.1:%d", "http://SECRET@127.0.0.1:%d/",
                           "https://ergon:SECRET@127.0.0.1:%d/base?x=1"};
    for (size_t i = 0; i < (sizeof forms / sizeof forms[0]); i++) {
        snprintf(url, sizeof url, forms[i], port);
        ASSERT_OK(erg_srv_client_new(url, &o, &c, &err));
        ASSERT(erg_srv_client_request(c, "GET", "/v1/jobs", NULL, &http, &resp, &err) != ERG_OK);
        printf("# %s\n", err.msg);
        ASSERT_MSG(!strstr(err.msg, "SECRET"), "form %zu: the token leaks: %s", i, err.msg);
        erg_srv_client_free(c);
    }
    close(fd);
}

TEST(bad_scheme_message_has_no_token)
{
    const char *urls[] = {"ftp://ergon:SECRET@host:7787", "ergon:SECRET@host:7787",
                          "htp://SECRET@host/x@y"};
    for (size_t i = 0; i < (sizeof urls / sizeof urls[0]); i++) {
        erg_error err;
        erg_srv_client *c = NULL;
        ASSERT_EQ_INT(erg_srv_client_new(urls[i], NULL, &c, &err), ERG_EINVAL);
        printf("# %s\n", err.msg);
        ASSERT_CONTAINS(err.msg, "must start with http:// or https://");
        ASSERT_MSG(!strstr(err.msg, "SECRET"), "%s: the token leaks: %s", urls[i], err.msg);
        ASSERT(c == NULL);
    }
}

TAP_MAIN(TEST_ENTRY(connect_failure_message_has_no_token),
         TEST_ENTRY(bad_scheme_message_has_no_token))
