/* pp_pipeline.h: what a pipeline-parallel run is made of, besides the schedule
 * (pp_schedule.h): the partition of the layer list into stages, the cost file that drives the
 * sim backend, and the plan file the tuner writes. Read by pptrain, the executor, and later the
 * analyzer and tuner. Pure data and parsing: no threads. */
#ifndef PP_PIPELINE_H
#define PP_PIPELINE_H

#include "pp_common.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================== */
/* Partition: the layer list [0, L) cut into P = S * v contiguous pieces                      */
/* ======================================================================================== */

typedef struct pp_partition {
    int L;       /* layers in the model's layer list */
    int S;       /* stages */
    int v;       /* virtual chunks per stage (1 unless interleaved) */
    int P;       /* pieces = S * v */
    int *bounds; /* [P + 1]: piece p holds layers [bounds[p], bounds[p+1]); bounds[0] = 0,
                    bounds[P] = L, strictly increasing */
} pp_partition;

/* Even split by layer count; the remainder goes to the later pieces (L = 14, P = 4 gives
 * 3, 3, 4, 4). PP_ERR_INVALID when P > L. */
pp_status pp_partition_even(int L, int S, int v, pp_partition *out);
/* From explicit boundaries (n = P + 1 values); the message names the first bad value. */
pp_status pp_partition_from_bounds(const int *bounds, int n, int L, int S, int v,
                                   pp_partition *out);
/* Parses "0,3,7,12,14" (P + 1 comma-separated integers) for a model of L layers; S is inferred
 * as P / v (P must be a multiple of v). */
pp_status pp_partition_parse(const char *text, int L, int v, pp_partition *out);
void pp_partition_free(pp_partition *p);
/* Writes "0,3,7,12,14" into buf. */
void pp_partition_format(const pp_partition *p, char *buf, size_t cap);

/* ======================================================================================== */
/* Cost file (docs/cost-file.md): per-layer, per-micro-batch costs that the sim backend      */
/* replays and that pprof-tune --export-costs writes                                          */
/* ======================================================================================== */

typedef struct pp_layer_cost {
    char name[64];
    double fwd_us;
    double bwd_us;
    double bwd_input_us;  /* split backward (ZB); both 0 and has_split = 0 when absent */
    double bwd_weight_us;
    int has_split;
    uint64_t activation_bytes; /* tensor this layer hands to the next one, per micro-batch */
    uint64_t param_bytes;
} pp_layer_cost;

typedef struct pp_costs {
    int n_layers;
    pp_layer_cost *layers;
    double p2p_GBps;       /* inter-stage bandwidth; 0 = transfers cost latency only */
    double p2p_latency_us; /* per message */
    double optimizer_us;   /* per stage per optimizer step */
    int microbatch_size;   /* sequences per micro-batch the costs were measured at; 0 = not
                              recorded */
} pp_costs;

/* Loads and validates a cost file; every problem (missing file, bad JSON, missing or negative
 * field, unknown key, wrong type) is PP_ERR_INVALID (PP_ERR_IO when unreadable) with a message
 * naming the file, the layer index and the field. */
pp_status pp_costs_load(const char *path, pp_costs **out);
/* The same from a JSON text (`origin` names it in messages). */
pp_status pp_costs_parse(const char *json, const char *origin, pp_costs **out);
/* Writes a cost file (atomically). */
pp_status pp_costs_write(const pp_costs *c, const char *path);
/* A cost set of n uniform layers (tests and examples). */
pp_status pp_costs_uniform(int n_layers, double fwd_us, double bwd_us, uint64_t act_bytes,
                           pp_costs **out);
void pp_costs_destroy(pp_costs *c);
/* Time of one transfer of `bytes` under the cost file's link model, in microseconds. */
double pp_costs_transfer_us(const pp_costs *c, uint64_t bytes);

/* ======================================================================================== */
/* Plan file (docs/plan-file.md): written by pprof-tune, read by pptrain --plan / PPROF_PLAN   */
/* ======================================================================================== */

typedef struct pp_plan {
    int version;     /* 1 */
    int num_layers;  /* the model's layer-list length the plan was made for */
    pp_partition partition;
    char schedule[32];   /* "gpipe", "1f1b", "interleaved", "zb-h1" */
    int microbatches;    /* M */
    int microbatch_size; /* sequences per micro-batch; 0 = not set */
    uint64_t memory_limit_bytes; /* per stage, 0 = none */
    double predicted_step_ms;    /* < 0 when absent */
    double predicted_bubble;     /* < 0 when absent */
    char baseline[512];          /* run the plan came from, "" when absent */
} pp_plan;

/* Loads and validates a plan; messages name the file and field. PP_ERR_INVALID for bad
 * content, PP_ERR_IO when unreadable. */
pp_status pp_plan_load(const char *path, pp_plan *out);
pp_status pp_plan_parse(const char *json, const char *origin, pp_plan *out);
pp_status pp_plan_write(const pp_plan *p, const char *path);
void pp_plan_free(pp_plan *p);

#ifdef __cplusplus
}
#endif
#endif /* PP_PIPELINE_H */
