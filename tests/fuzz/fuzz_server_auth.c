/* fuzz_server_auth.c: the server's access-control parsers (src/server/auth.c): the
 * Authorization header (Bearer, Basic with base64) against a token, and --allow-net CIDR
 * networks with client addresses matched against them. First byte: which one. */
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    erg_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        free(s);
        return 0;
    }
    erg_server_opts o;
    erg_server_opts_init(&o);
    erg_error err;
    if (data[0] % 2 == 0) {
        o.auth_token = "0123456789abcdef-token";
        if (erg__srv_auth_init(srv, &o, &err))
            abort(); /* a valid token must be accepted */
        srv_auth_result r = erg__srv_auth_token(srv, s);
        /* only the exact credentials pass */
        if (r == SRV_AUTH_OK && !strstr(s, "0123456789abcdef-token") &&
            strncasecmp(s + strspn(s, " "), "Basic ", 6))
            abort();
    } else {
        /* networks separated by newlines, then the address to match on the last line */
        const char *nets[16];
        size_t n = 0;
        char *save = NULL;
        char *last = NULL;
        for (char *t = strtok_r(s, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
            if (last && n < 16)
                nets[n++] = last;
            last = t;
        }
        o.allow_nets = nets;
        o.n_allow_nets = n;
        if (n && !erg__srv_auth_init(srv, &o, &err) && last) {
            struct sockaddr_in a4 = {0};
            struct sockaddr_in6 a6 = {0};
            if (inet_pton(AF_INET, last, &a4.sin_addr) == 1) {
                a4.sin_family = AF_INET;
                (void)erg__srv_auth_net_allowed(srv, (struct sockaddr *)&a4);
            } else if (inet_pton(AF_INET6, last, &a6.sin6_addr) == 1) {
                a6.sin6_family = AF_INET6;
                (void)erg__srv_auth_net_allowed(srv, (struct sockaddr *)&a6);
            }
        }
    }
    erg__srv_auth_free(srv);
    free(srv);
    free(s);
    return 0;
}
