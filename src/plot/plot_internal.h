/* plot_internal.h: the pictures' decisions, exposed for the unit tests. */
#ifndef ERGON_PLOT_INTERNAL_H
#define ERGON_PLOT_INTERNAL_H

#include "ergon/plot.h"

#include <stdbool.h>
#include <stddef.h>

/* The timeline's subtitle: what the box labels are, and how many boxes were
 * too narrow for one (labelled of n); actions: the boxes carry PyTorch action
 * names (chunked or file schedules) rather than F<m>/B<m>. */
void erg__plot_box_subtitle(int labelled, int n, bool actions, char *buf, size_t size);
/* flags[k] = 1 for each point some other point beats (as fast or faster and
 * cheaper); returns how many. */
size_t erg__plot_dominated(const erg_plot_point *pts, size_t n, unsigned char *flags);

#endif
