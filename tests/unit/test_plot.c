/* test_plot.c: timeline and frontier pictures in PNG, SVG and PDF; bad input. */
#include "core/internal.h"
#include "ergon/plot.h"
#include "plot/plot_internal.h"
#include "tap.h"

#include <sys/stat.h>

static erg_profile *toy(void)
{
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1000,1.0,100\n0,backward,1000,2.0,200\n"
                      "0,forward,900,1.1,80\n0,backward,900,2.2,160\n"
                      "1,forward,1000,1.5,150\n1,backward,1000,3.0,300\n"
                      "1,forward,900,1.7,120\n1,backward,900,3.3,250\n";
    erg_profile *p;
    erg_error e;
    ASSERT_MSG(erg_profile_parse_csv(csv, strlen(csv), "toy.csv", &p, &e) == ERG_OK, "%s", e.msg);
    return p;
}

static long file_size(const char *path, unsigned char *head, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    memset(head, 0, n);
    size_t got = fread(head, 1, n, f);
    (void)got;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fclose(f);
    return sz;
}

static void tmpname(char *buf, size_t size, const char *ext)
{
    snprintf(buf, size, "/tmp/ergon_test_plot_%d.%s", (int)getpid(), ext);
}

TEST(timeline_in_three_formats)
{
    erg_profile *p = toy();
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_plan *plan;
    erg_error e;
    ASSERT_EQ_INT(erg_plan_new(&sc, 2, 4, &plan, &e), ERG_OK);
    erg_plan_fill(plan, 1000);
    erg_plan_stage_freqs(plan, 0)[3] = 900;
    const char *exts[3] = {"png", "svg", "pdf"};
    const char *magic[3] = {"\x89PNG", "<?xml", "%PDF"};
    for (int i = 0; i < 3; i++) {
        char path[256];
        tmpname(path, sizeof path, exts[i]);
        erg_plot_opts o;
        erg_plot_opts_init(&o);
        o.color = i == 1 ? ERG_PLOT_COLOR_POWER : ERG_PLOT_COLOR_CLOCK;
        ASSERT_MSG(erg_plot_timeline(p, plan, 50, &o, path, &e) == ERG_OK, "%s", e.msg);
        unsigned char head[8];
        long sz = file_size(path, head, sizeof head);
        ASSERT_MSG(sz > 1000, "%s: %ld bytes", path, sz);
        ASSERT_MSG(!memcmp(head, magic[i], strlen(magic[i])), "%s has the wrong header", path);
        remove(path);
    }
    /* a clock the profile lacks, an unknown extension, an unwritable path */
    char path[256];
    tmpname(path, sizeof path, "png");
    ASSERT_EQ_INT(erg_plot_timeline(p, plan, 50, NULL, "/tmp/x.gif", &e), ERG_EINVAL);
    ASSERT(strstr(e.msg, ".png"));
    ASSERT_EQ_INT(erg_plot_timeline(p, plan, 50, NULL, "/nonexistent/dir/x.pdf", &e), ERG_EIO);
    erg_plan_stage_freqs(plan, 1)[0] = 950;
    ASSERT_EQ_INT(erg_plot_timeline(p, plan, 50, NULL, path, &e), ERG_ENOTFOUND);
    ASSERT(strstr(e.msg, "950"));
    erg_plan_free(plan);
    erg_profile_free(p);
}

TEST(frontier_plot)
{
    erg_plot_point line[50], pts[2] = {{1.0, 900}, {1.2, 800}};
    for (int i = 0; i < 50; i++)
        line[i] = (erg_plot_point){1.0 + i * 0.01, 1000 - 5.0 * i + 0.1 * i * i};
    erg_plot_series s[3] = {
        {"frontier", line, 50, true}, {"envpipe", pts, 1, false}, {"zeus", pts + 1, 1, false}};
    char path[256];
    tmpname(path, sizeof path, "png");
    erg_error e;
    ASSERT_MSG(erg_plot_frontier(s, 3, NULL, path, &e) == ERG_OK, "%s", e.msg);
    unsigned char head[8];
    ASSERT(file_size(path, head, sizeof head) > 1000);
    remove(path);
    erg_plot_point bad = {NAN, 1};
    erg_plot_series b = {"bad", &bad, 1, false};
    ASSERT_EQ_INT(erg_plot_frontier(&b, 1, NULL, path, &e), ERG_EINVAL);
    erg_plot_series empty = {"empty", NULL, 0, true};
    ASSERT_EQ_INT(erg_plot_frontier(&empty, 1, NULL, path, &e), ERG_EINVAL);
    /* a single point still gets a sensible axis */
    ASSERT_EQ_INT(erg_plot_frontier(s + 1, 1, NULL, path, &e), ERG_OK);
    remove(path);
}

/* issue 16 item 4: a curve called "frontier" is drawn solid only through its
 * non-dominated plans; the rising slow end (slower and costlier than another
 * plan) is found and drawn dashed. */
TEST(frontier_dominated_tail_is_found)
{
    /* slowest first, as frontier.csv: energy falls, then rises again */
    erg_plot_point p[] = {{3.5, 5750}, {3.3, 5700}, {3.2, 5665}, {3.1, 5680},
                          {3.0, 5700}, {2.9, 5900}, {2.85, 6200}};
    unsigned char d[7];
    ASSERT_EQ_INT((int)erg__plot_dominated(p, 7, d), 2);
    ASSERT_EQ_INT(d[0], 1);
    ASSERT_EQ_INT(d[1], 1);
    for (int k = 2; k < 7; k++)
        ASSERT_EQ_INT(d[k], 0);
    erg_plot_point q[] = {{1, 10}, {2, 9}, {3, 8}};
    ASSERT_EQ_INT((int)erg__plot_dominated(q, 3, d), 0);
}

/* issue 16 item 4: the timeline's subtitle explains F<m>/B<m> only when boxes
 * carry them, and says how many were too narrow. */
TEST(timeline_subtitle_says_when_labels_are_omitted)
{
    char b[256];
    erg__plot_box_subtitle(96, 96, false, b, sizeof b);
    ASSERT_CONTAINS(b, "boxes: F<m>/B<m> of microbatch m;");
    erg__plot_box_subtitle(90, 96, false, b, sizeof b);
    ASSERT_CONTAINS(b, "6 of 96 boxes too narrow to label");
    erg__plot_box_subtitle(0, 1536, false, b, sizeof b);
    ASSERT_CONTAINS(b, "too narrow to label");
    ASSERT_MSG(!strstr(b, "F<m>"), "subtitle explains labels no box has: %s", b);
    ASSERT_CONTAINS(b, "critical path");
    /* chunked and file schedules label boxes with PyTorch's action names */
    erg__plot_box_subtitle(10, 10, true, b, sizeof b);
    ASSERT_CONTAINS(b, "<stage><F|B|I|W><m>");
    ASSERT_MSG(!strstr(b, "F<m>/B<m>"), "subtitle of a chunked schedule: %s", b);
}

TAP_MAIN(TEST_ENTRY(timeline_in_three_formats), TEST_ENTRY(frontier_plot),
         TEST_ENTRY(frontier_dominated_tail_is_found),
         TEST_ENTRY(timeline_subtitle_says_when_labels_are_omitted))
