/* provenance.c: plans that know where they came from. Plans ergon writes for a user (choose
 * --out, plan envpipe --out) record the fingerprint of the profile they were planned with, the
 * blocking power and the clock table (erg_plan_set_provenance); commands that take a plan with
 * a profile (emulate, show timeline) check them, and the schedule the plan file names against
 * --schedule, and refuse a mismatch naming both sides, unless --force. Plans without a
 * provenance (Perseus's, Zeus's, older ergon's) are taken as they are. */
#include "cli.h"

#include "ergon/plan.h"
#include "ergon/profile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int cli_plan_stamp(const char *cmd, erg_plan *plan, const erg_profile *prof, double power_w,
                   const char *clock_table)
{
    char fp[ERG_PROFILE_FINGERPRINT_LEN];
    erg_profile_fingerprint(prof, fp);
    erg_error err = {0};
    if (erg_plan_set_provenance(plan, fp, power_w, clock_table ? clock_table : "profile", &err))
        return cli_report(cmd, &err);
    return CLI_OK;
}

int cli_plan_check(const char *cmd, const char *plan_path, const erg_plan *plan,
                   const erg_profile *prof, const char *profile_path, double power_w,
                   const erg_schedule_kind *asked, bool force)
{
    char why[1024] = "";
    const char *pfp = erg_plan_profile_fingerprint(plan);
    char fp[ERG_PROFILE_FINGERPRINT_LEN];
    erg_profile_fingerprint(prof, fp);
    erg_schedule_kind stated;
    double pw = erg_plan_blocking_power(plan);
    if (pfp && strcmp(pfp, fp))
        snprintf(why, sizeof why,
                 "was planned with profile %s, but %s is profile %s (a plan from another "
                 "profile or another GPU?)",
                 pfp, profile_path, fp);
    else if (!isnan(pw) && power_w >= 0 && fabs(pw - power_w) > 1e-9 * fmax(1, fabs(pw)))
        snprintf(why, sizeof why,
                 "was planned with a blocking power of %g W, but this run uses %g W", pw, power_w);
    else if (erg_plan_schedule_stated(plan, &stated) && !asked &&
             stated != erg_plan_schedule(plan).kind)
        snprintf(why, sizeof why, "names the %s schedule but was read as %s: give --schedule %s",
                 erg_schedule_name(stated), erg_schedule_name(erg_plan_schedule(plan).kind),
                 erg_schedule_name(stated));
    else if (asked && erg_plan_schedule_stated(plan, &stated) && stated != *asked)
        snprintf(why, sizeof why,
                 "is a plan for the %s schedule, but --schedule %s was given (drop --schedule: "
                 "the plan names its own)",
                 erg_schedule_name(stated), erg_schedule_name(*asked));
    if (!why[0])
        return CLI_OK;
    if (force) {
        fprintf(stderr, "ergon %s: warning: %s %s; going on (--force)\n", cmd, plan_path, why);
        return CLI_OK;
    }
    fprintf(stderr, "ergon %s: %s %s; --force to use it anyway\n", cmd, plan_path, why);
    return CLI_USER_ERROR;
}
