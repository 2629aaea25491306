/* cmd_fleet.c: `ergon fleet`: an operator's view of the fleet of a running `ergon serve`: its
 * state, the power cap and the jobs' weights, over the /v1 API (docs/fleet.md). */
#include "cli.h"

#include "ergon/server_client.h"

#include <stdio.h>
#include <string.h>

static const cli_help fleet_help = {
    "usage: ergon fleet status --server URL\n"
    "       ergon fleet simulate --frontiers DIR[,DIR...] --out DIR ... (--help)\n"
    "       ergon fleet cap --server URL (W | none)\n"
    "       ergon fleet weight --server URL JOB_ID W\n",
    "The fleet of a running 'ergon serve' (docs/fleet.md): every running job of the\n"
    "Frontier scheduler. Under a power cap (watts, for the sum of the jobs' average\n"
    "powers) the server assigns each job a plan of its frontier at the least weighted\n"
    "slowdown, and solves again when a job arrives, leaves or straggles, or when the\n"
    "cap or a weight changes. status prints GET /v1/fleet; cap sets the cap (none\n"
    "lifts it: the jobs run their own targets); weight sets a job's weight (>= 0,\n"
    "default 1). The answer is the fleet as JSON. The token, when the server has one,\n"
    "comes from ERGON_SERVE_TOKEN (docs/http-api.md).\n",
    "Exit status: 0 ok, 1 the server refused or could not be reached, 2 usage.\n"};

int cmd_fleet(int argc, char **argv)
{
    const char *cmd = "fleet";
    const char *server = NULL;
    if (argc > 1 && !strcmp(argv[1], "simulate"))
        return cmd_fleet_simulate(argc - 1, argv + 1);
    const cli_opt opts[] = {
        CLI_OPT_S("server", "URL", &server, "the server, http(s)://host:port"),
        CLI_OPTS_END,
    };
    int first = 0, rc = cli_opts_parse(cmd, argc, argv, opts, &fleet_help, &first);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    const char *what = first < argc ? argv[first] : NULL;
    int nargs = argc - first - 1;
    if (!server)
        return cli_usage_error(cmd, "--server URL is required");
    char body[128] = "", path[600] = "/v1/fleet";
    const char *method = "POST";
    if (what && !strcmp(what, "status") && nargs == 0) {
        method = "GET";
    } else if (what && !strcmp(what, "cap") && nargs == 1) {
        double w;
        if (!strcmp(argv[first + 1], "none"))
            snprintf(body, sizeof body, "{\"cap_w\": null}");
        else if (cli_parse_double(cmd, "cap", argv[first + 1], 1e-9, 1e12, &w))
            snprintf(body, sizeof body, "{\"cap_w\": %.17g}", w);
        else
            return CLI_USAGE;
    } else if (what && !strcmp(what, "weight") && nargs == 2) {
        double w;
        if (!cli_parse_double(cmd, "weight", argv[first + 2], 0, 1e6, &w))
            return CLI_USAGE;
        if (strlen(argv[first + 1]) > 300 || strpbrk(argv[first + 1], "/?#%"))
            return cli_usage_error(cmd, "'%s' is not a job id", argv[first + 1]);
        snprintf(path, sizeof path, "/v1/fleet/jobs/%s", argv[first + 1]);
        snprintf(body, sizeof body, "{\"weight\": %.17g}", w);
    } else {
        return cli_usage_error(cmd, "give status, cap W|none, or weight JOB_ID W");
    }
    erg_error err = {0};
    erg_srv_client *cl = NULL;
    char *resp = NULL;
    int http = 0;
    erg_srv_client_opts o;
    erg_srv_client_opts_init(&o);
    o.max_retries = 2;
    if (erg_srv_client_new(server, &o, &cl, &err) ||
        erg_srv_client_request(cl, method, path, *body ? body : NULL, &http, &resp, &err)) {
        rc = cli_report(cmd, &err);
    } else if (http != 200) {
        fprintf(stderr, "ergon %s: the server answered %d: %s\n", cmd, http, resp ? resp : "");
        rc = CLI_USER_ERROR;
    } else {
        printf("%s\n", resp ? resp : "");
    }
    erg_free(resp);
    erg_srv_client_free(cl);
    return rc;
}
