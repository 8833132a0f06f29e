/* messages.c: the schedule's message rules (pp_plan.h): the tag a send or receive carries, and
 * the facts transports ask of a schedule's links (in-order delivery, which stages talk). The
 * executor tags its transport messages with pp_schedule_msg_tag (inline in pp_plan.h: the
 * analyzer replays every step with it); the replay, the simulator and
 * the rebalancer match receives to sends by it; the pipeline trainer checks NCCL's needs here. */
#include "pp_plan.h"

#include <stdio.h>
#include <string.h>

static int is_send(const pp_instr *in)
{
    return in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD;
}

static int is_recv(const pp_instr *in)
{
    return in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD;
}

int pp_schedule_links_fifo(const pp_schedule *sc, char *why, size_t n)
{
    /* for every directed link a -> b: the k-th send of a to b is the k-th receive of b from a */
    for (int a = 0; a < sc->S; a++)
        for (int b = 0; b < sc->S; b++) {
            if (a == b)
                continue;
            int i = 0, j = 0, k = 0;
            for (;;) {
                while (i < sc->n_instrs[a] &&
                       !(is_send(&sc->instrs[a][i]) && sc->instrs[a][i].peer == b))
                    i++;
                while (j < sc->n_instrs[b] &&
                       !(is_recv(&sc->instrs[b][j]) && sc->instrs[b][j].peer == a))
                    j++;
                if (i >= sc->n_instrs[a] || j >= sc->n_instrs[b])
                    break;
                pp_msg_tag x = pp_schedule_msg_tag(sc, a, &sc->instrs[a][i]);
                pp_msg_tag y = pp_schedule_msg_tag(sc, b, &sc->instrs[b][j]);
                if (x.kind != y.kind || x.mb != y.mb || x.piece != y.piece) {
                    if (why && n)
                        snprintf(why, n,
                                 "link %d -> %d: message %d is sent as %s of micro-batch %d but "
                                 "received as %s of micro-batch %d",
                                 a, b, k, x.kind == PP_MSG_ACT ? "activations" : "gradients",
                                 x.mb, y.kind == PP_MSG_ACT ? "activations" : "gradients", y.mb);
                    return 0;
                }
                i++, j++, k++;
            }
        }
    return 1;
}

int pp_schedule_peers(const pp_schedule *sc, int stage, int *peers, int max)
{
    int n = 0;
    for (int i = 0; i < sc->n_instrs[stage]; i++) {
        const pp_instr *in = &sc->instrs[stage][i];
        if (!is_send(in) && !is_recv(in))
            continue;
        int j = 0;
        while (j < n && peers[j] < in->peer)
            j++;
        if (j < n && peers[j] == in->peer)
            continue;
        if (n == max)
            return -1;
        memmove(peers + j + 1, peers + j, sizeof *peers * (size_t)(n - j));
        peers[j] = in->peer;
        n++;
    }
    return n;
}
