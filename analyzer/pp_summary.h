/* pp_summary.h: the summary JSON (docs/summary-json.md), pprof-report --json's output and one of
 * pprof-check's inputs. One module writes it, reads it back and owns its version: a field added
 * here is added to both sides at once. Nothing here keeps state: safe from several threads on
 * different objects. */
#ifndef PP_SUMMARY_H
#define PP_SUMMARY_H

#include "pp_analyzer.h"
#include "pp_check.h"

#include <cJSON.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "summary_version" of the summaries written here, and the only one read. Bumped when a field
 * changes meaning or disappears; adding fields keeps the version (docs/summary-json.md). */
#define PP_SUMMARY_VERSION 1
/* The key that tells a summary from other JSON files. */
#define PP_SUMMARY_VERSION_KEY "summary_version"

/* Writes the summary JSON of `a` to `out`. PP_ERR_IO when writing fails. */
pp_status pp_summary_write(const pp_analysis *a, FILE *out);

/* Reads a parsed summary into r (made by the caller, r->source names it in messages): its
 * shape, the per-step samples of step time, throughput, bubble and the stages' forward and
 * backward, and the links' bandwidths. Another version, a missing or mistyped field are
 * PP_ERR_INVALID naming the field. */
pp_status pp_summary_read(const cJSON *root, pp_check_run *r);

#ifdef __cplusplus
}
#endif
#endif /* PP_SUMMARY_H */
